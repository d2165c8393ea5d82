package receipt

import (
	"errors"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// SummaryFields are the Receipt fields a summary holds (DecodeSummary,
// OpenSummary): what the control plane's receipt index and passive
// evidence use. Every other field is validated but not decoded.
var SummaryFields = []protoreflect.Name{
	"receipt_id", "emitted_at", "workflow_id", "principal_class", "tenant_class", "region",
	"selected", "consumer_side_effect", "attempt_count", "attempts", "started_at", "ended_at",
	"latency", "outcome", "failed_layer", "transport_status", "jsonrpc_code",
}

var (
	receiptRules = rulesFor((&mcpreadyv1.Receipt{}).ProtoReflect().Descriptor(), map[protoreflect.FullName]*rules{})
	summaryKeep  = func() []bool {
		fields := (&mcpreadyv1.Receipt{}).ProtoReflect().Descriptor().Fields()
		keep := make([]bool, len(receiptRules.byNum))
		for _, n := range SummaryFields {
			keep[fields.ByName(n).Number()] = true
		}
		return keep
	}()
	errWire = errors.New("invalid wire format")
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
// only SummaryFields set. It accepts exactly the encodings proto.Unmarshal
// accepts (wire format, UTF-8 of every string, nested messages), so it is
// as strict a check that the receipt decodes, at a fraction of the cost.
// scratch is reused between calls when not nil.
func DecodeSummary(encoded []byte, scratch *[]byte) (*mcpreadyv1.Receipt, error) {
	var buf []byte
	if scratch != nil {
		buf = (*scratch)[:0]
	}
	for b := encoded; len(b) > 0; {
		num, typ, n, m := consumeField(b)
		if m < 0 {
			return nil, errWire
		}
		if int(num) < len(summaryKeep) && summaryKeep[num] {
			buf = append(buf, b[:n+m]...)
		} else if err := validField(receiptRules.of(num), typ, b[n:n+m]); err != nil {
			return nil, err
		}
		b = b[n+m:]
	}
	if scratch != nil {
		*scratch = buf
	}
	r := &mcpreadyv1.Receipt{}
	if err := proto.Unmarshal(buf, r); err != nil {
		return nil, err
	}
	return r, nil
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
