package ledger

import (
	"errors"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// SummaryFields are the Receipt fields a summary holds (DecodeSummary,
// OpenSummary): what the control plane's receipt index and passive
// evidence use. Every other field is validated but not decoded.
var SummaryFields = []protoreflect.Name{
	"receipt_id", "emitted_at", "workflow_id", "principal_class", "tenant_class", "region",
	"selected", "consumer_side_effect", "attempt_count", "attempts", "started_at", "ended_at",
	"latency", "outcome", "failed_layer", "transport_status", "jsonrpc_code", "workflow",
	"semantic_validation", "semantic_validator_version", "warmth", "auth_class", "input_class",
}

var (
	receiptRules = rulesFor((&mcpreadyv1.Receipt{}).ProtoReflect().Descriptor(), map[protoreflect.FullName]*rules{})
	errWire      = errors.New("invalid wire format")
)

// check says how validMessage checks a length-delimited field value.
type check uint8

const (
	checkNone    check = iota // unknown field, bytes, or not length-delimited in the schema
	checkUTF8                 // proto3 string
	checkMessage              // nested message (or map entry)
	checkVarints              // packed repeated varints
	checkFixed32              // packed repeated 4-byte values
	checkFixed64              // packed repeated 8-byte values
)

type rule struct {
	check check
	msg   *rules
}

// rules is a message's field checks indexed by field number.
type rules struct{ byNum []rule }

func (r *rules) of(num protowire.Number) rule {
	if int(num) < len(r.byNum) {
		return r.byNum[num]
	}
	return rule{}
}

func rulesFor(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]*rules) *rules {
	if r := seen[md.FullName()]; r != nil {
		return r
	}
	r := &rules{}
	seen[md.FullName()] = r
	fields := md.Fields()
	maxNum := protowire.Number(0)
	for i := 0; i < fields.Len(); i++ {
		maxNum = max(maxNum, fields.Get(i).Number())
	}
	r.byNum = make([]rule, maxNum+1)
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		var ru rule
		switch k := fd.Kind(); {
		case k == protoreflect.StringKind:
			if fd.Syntax() == protoreflect.Proto3 {
				ru.check = checkUTF8
			}
		case k == protoreflect.MessageKind:
			ru = rule{check: checkMessage, msg: rulesFor(fd.Message(), seen)}
		case k == protoreflect.BytesKind || k == protoreflect.GroupKind || !fd.IsList():
		case k == protoreflect.Fixed32Kind || k == protoreflect.Sfixed32Kind || k == protoreflect.FloatKind:
			ru.check = checkFixed32
		case k == protoreflect.Fixed64Kind || k == protoreflect.Sfixed64Kind || k == protoreflect.DoubleKind:
			ru.check = checkFixed64
		default:
			ru.check = checkVarints
		}
		r.byNum[fd.Number()] = ru
	}
	return r
}

// DecodeSummary decodes the summary of one encoded receipt: a Receipt with
// only SummaryFields set, as proto.Unmarshal would set them. It accepts
// exactly the encodings proto.Unmarshal accepts (wire format, UTF-8 of
// every string, nested messages, also in the fields it does not keep), so
// it is as strict a check that the receipt decodes, at a fraction of the
// cost.
func DecodeSummary(encoded []byte) (*mcpreadyv1.Receipt, error) {
	r := &mcpreadyv1.Receipt{}
	err := fields(encoded, receiptRules, func(num protowire.Number, typ protowire.Type, v []byte) (bool, error) {
		var err error
		switch typ {
		case protowire.BytesType:
			switch num {
			case 1:
				r.ReceiptId, err = str(v)
			case 5:
				r.EmittedAt, err = timestamp(r.EmittedAt, v)
			case 7:
				r.WorkflowId, err = str(v)
			case 10:
				r.PrincipalClass, err = str(v)
			case 11:
				r.TenantClass, err = str(v)
			case 12:
				r.Region, err = str(v)
			case 18:
				if r.Selected == nil {
					r.Selected = &mcpreadyv1.Selection{}
				}
				err = selection(r.Selected, v)
			case 25:
				a := &mcpreadyv1.Attempt{}
				r.Attempts = append(r.Attempts, a)
				err = attempt(a, v)
			case 27:
				r.StartedAt, err = timestamp(r.StartedAt, v)
			case 28:
				r.EndedAt, err = timestamp(r.EndedAt, v)
			case 29:
				r.Latency, err = duration(r.Latency, v)
			case 32:
				r.TransportStatus, err = str(v)
			case 190:
				if r.Workflow == nil {
					r.Workflow = &mcpreadyv1.WorkflowRecord{}
				}
				err = proto.UnmarshalOptions{Merge: true, DiscardUnknown: true}.Unmarshal(payload(v), r.Workflow)
			case 36:
				r.SemanticValidation, err = str(v)
			case 37:
				r.SemanticValidatorVersion, err = str(v)
			case 201:
				r.AuthClass, err = str(v)
			case 202:
				r.InputClass, err = str(v)
			default:
				return false, nil
			}
		case protowire.VarintType:
			x, _ := protowire.ConsumeVarint(v)
			switch num {
			case 20:
				r.ConsumerSideEffect = mcpreadyv1.SideEffectClass(int32(x))
			case 24:
				r.AttemptCount = int32(x)
			case 30:
				r.Outcome = mcpreadyv1.OutcomeClass(int32(x))
			case 31:
				r.FailedLayer = mcpreadyv1.ReadinessLayer(int32(x))
			case 33:
				r.JsonrpcCode = int32(x)
			case 200:
				r.Warmth = mcpreadyv1.CallWarmth(int32(x))
			default:
				return false, nil
			}
		default:
			return false, nil
		}
		return true, err
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

func selection(s *mcpreadyv1.Selection, v []byte) error {
	return fields(payload(v), receiptRules.of(18).msg, func(num protowire.Number, typ protowire.Type, v []byte) (bool, error) {
		var p *string
		switch num {
		case 1:
			p = &s.Entry
		case 2:
			p = &s.Endpoint
		case 3:
			p = &s.ServerName
		case 4:
			p = &s.ServerVersion
		case 5:
			p = &s.ToolName
		case 6:
			p = &s.InputSchemaDigest
		case 7:
			p = &s.OutputSchemaDigest
		case 8:
			p = &s.ProtocolVersion
		}
		if p == nil || typ != protowire.BytesType {
			return false, nil
		}
		var err error
		*p, err = str(v)
		return true, err
	})
}

func attempt(a *mcpreadyv1.Attempt, v []byte) error {
	return fields(payload(v), receiptRules.of(25).msg, func(num protowire.Number, typ protowire.Type, v []byte) (bool, error) {
		var err error
		switch typ {
		case protowire.BytesType:
			switch num {
			case 2:
				a.Entry, err = str(v)
			case 3:
				a.StartedAt, err = timestamp(a.StartedAt, v)
			case 4:
				a.Latency, err = duration(a.Latency, v)
			case 6:
				a.TransportStatus, err = str(v)
			default:
				return false, nil
			}
		case protowire.VarintType:
			x, _ := protowire.ConsumeVarint(v)
			switch num {
			case 1:
				a.Number = int32(x)
			case 5:
				a.Outcome = mcpreadyv1.OutcomeClass(int32(x))
			case 7:
				a.JsonrpcCode = int32(x)
			case 8:
				a.IsError = protowire.DecodeBool(x)
			case 9:
				a.Hedged = protowire.DecodeBool(x)
			default:
				return false, nil
			}
		default:
			return false, nil
		}
		return true, err
	})
}

// secondsNanos merges a Timestamp or Duration encoding into *secs, *nanos.
func secondsNanos(secs *int64, nanos *int32, v []byte) error {
	return fields(payload(v), nil, func(num protowire.Number, typ protowire.Type, v []byte) (bool, error) {
		if typ != protowire.VarintType || (num != 1 && num != 2) {
			return false, nil
		}
		x, _ := protowire.ConsumeVarint(v)
		if num == 1 {
			*secs = int64(x)
		} else {
			*nanos = int32(x)
		}
		return true, nil
	})
}

func timestamp(t *timestamppb.Timestamp, v []byte) (*timestamppb.Timestamp, error) {
	if t == nil {
		t = &timestamppb.Timestamp{}
	}
	return t, secondsNanos(&t.Seconds, &t.Nanos, v)
}

func duration(d *durationpb.Duration, v []byte) (*durationpb.Duration, error) {
	if d == nil {
		d = &durationpb.Duration{}
	}
	return d, secondsNanos(&d.Seconds, &d.Nanos, v)
}

// payload is the content of a length-delimited value (already validated).
func payload(v []byte) []byte {
	p, _ := protowire.ConsumeBytes(v)
	return p
}

// str decodes a proto3 string value.
func str(v []byte) (string, error) {
	p := payload(v)
	if !utf8.Valid(p) {
		return "", errors.New("string field: invalid UTF-8")
	}
	return string(p), nil
}

// fields walks the fields of message b: set decodes the fields it keeps
// (returning true); every other field is checked as validField does. rs
// nil: a message with no strings or nested messages.
func fields(b []byte, rs *rules, set func(num protowire.Number, typ protowire.Type, v []byte) (bool, error)) error {
	for len(b) > 0 {
		num, typ, n, m := consumeField(b)
		if m < 0 {
			return errWire
		}
		v := b[n : n+m]
		b = b[n+m:]
		kept, err := set(num, typ, v)
		if err != nil {
			return err
		}
		if !kept && rs != nil {
			if err := validField(rs.of(num), typ, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// consumeField reads one field's tag (n bytes) and value (m bytes); m < 0
// for anything proto.Unmarshal rejects.
func consumeField(b []byte) (num protowire.Number, typ protowire.Type, n, m int) {
	num, typ, n = protowire.ConsumeTag(b)
	if n < 0 || num > protowire.MaxValidNumber {
		return 0, 0, 0, -1
	}
	return num, typ, n, protowire.ConsumeFieldValue(num, typ, b[n:])
}

// validMessage checks b as proto.Unmarshal would decode it into the
// message of rs, without decoding.
func validMessage(rs *rules, b []byte) error {
	for len(b) > 0 {
		num, typ, n, m := consumeField(b)
		if m < 0 {
			return errWire
		}
		if err := validField(rs.of(num), typ, b[n:n+m]); err != nil {
			return err
		}
		b = b[n+m:]
	}
	return nil
}

// validField checks one field value v (tag already consumed). proto.Unmarshal
// keeps an unknown field, or one whose wire type does not match the
// schema's, as unknown bytes: those need no check.
func validField(r rule, typ protowire.Type, v []byte) error {
	if r.check == checkNone || typ != protowire.BytesType {
		return nil
	}
	v, n := protowire.ConsumeBytes(v)
	if n < 0 {
		return errWire
	}
	switch r.check {
	case checkUTF8:
		if !utf8.Valid(v) {
			return errors.New("string field: invalid UTF-8")
		}
	case checkMessage:
		return validMessage(r.msg, v)
	default: // packed repeated scalars
		for len(v) > 0 {
			var m int
			switch r.check {
			case checkFixed32:
				_, m = protowire.ConsumeFixed32(v)
			case checkFixed64:
				_, m = protowire.ConsumeFixed64(v)
			default:
				_, m = protowire.ConsumeVarint(v)
			}
			if m < 0 {
				return errWire
			}
			v = v[m:]
		}
	}
	return nil
}
