// Package receipt builds execution receipts on the host agent (step 4 of
// "A tool call, step by step" in docs/architecture.md): one receipt per
// decision and invocation, stamped with its
// provenance, its arguments and result digested and redacted, its error
// text made safe.
//
// Redaction is the default: a receipt holds the digest of the call's
// arguments and result, never the raw values, and never headers, bearer
// tokens or credentials. Only argument fields named in the Redaction
// allow-list are kept verbatim.
//
// It must not define the receipt format: encoding, receipt digests,
// batches and the chain check are package ledger's, shared with the
// control plane and offline verifiers. It is pure: it does no I/O, does
// not sign (package sign does) and stores nothing (agent/spool does).
package receipt

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"sync"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/canonjson"
	"github.com/mcpready/mcpready/ledger"
)

// DefaultRedactionVersion names the default redaction policy: digests only,
// no kept argument fields. KeyedRedactionVersion names it with a digest
// key (Redaction.DigestKey).
const (
	DefaultRedactionVersion = "digest-only/v1"
	KeyedRedactionVersion   = "hmac-sha256/v1"
)

// maxErrorMessage bounds Receipt.error_message.
const maxErrorMessage = 512

// Redaction is the redaction policy. The zero value keeps no argument
// fields and records DefaultRedactionVersion.
type Redaction struct {
	// KeepArguments lists top-level argument field names whose values may be
	// kept verbatim in kept_arguments. Everything else is digested only.
	KeepArguments []string
	// Version names this policy in receipts; "" means
	// DefaultRedactionVersion, or KeyedRedactionVersion with a DigestKey.
	Version string
	// DigestKey, when set, keys the arguments and result digests
	// (KeyedDigest: HMAC-SHA256, written "hmac-sha256:<hex>"), so a
	// low-entropy argument cannot be recovered from a receipt by guessing
	// without the key. It is the organisation's key, which compliance
	// holds to check a guess; nil leaves the digests unkeyed (SHA-256).
	DigestKey []byte
}

func (p Redaction) version() string {
	switch {
	case p.Version != "":
		return p.Version
	case len(p.DigestKey) > 0:
		return KeyedRedactionVersion
	}
	return DefaultRedactionVersion
}

// digest is the receipt digest of b under p: keyed when p has a key.
func (p Redaction) digest(b []byte) string {
	if len(p.DigestKey) > 0 {
		return KeyedDigest(p.DigestKey, b)
	}
	return ArgumentsDigest(b)
}

// Builder stamps receipts with their provenance. The zero value works but
// leaves emitter fields empty.
type Builder struct {
	// EmitterID is the agent id.
	EmitterID string
	// EmitterVersion is the agent software version.
	EmitterVersion string
	Redaction      Redaction
}

// started is a receipt and its start time, allocated together (one
// allocation per call instead of two).
type started struct {
	r  mcpreadyv1.Receipt
	ts timestamppb.Timestamp
}

// finished is a receipt's end time and latency, allocated together.
type finished struct {
	ts      timestamppb.Timestamp
	latency durationpb.Duration
}

// Start returns a new receipt with id, provenance, emitted_at and started_at
// set to now.
func (b Builder) Start(now time.Time) *mcpreadyv1.Receipt {
	s := &started{}
	s.ts.Seconds, s.ts.Nanos = now.Unix(), int32(now.Nanosecond()) // timestamppb.New(now)
	r := &s.r
	r.ReceiptId = NewID()
	r.EmitterId, r.EmitterVersion = b.EmitterID, b.EmitterVersion
	r.RedactionPolicyVersion = b.Redaction.version()
	r.EmittedAt, r.StartedAt = &s.ts, &s.ts
	return r
}

// Arguments records the call's arguments: their digest and the allow-listed
// fields. It never stores the raw arguments.
func (b Builder) Arguments(r *mcpreadyv1.Receipt, args json.RawMessage) {
	Redact(r, args, b.Redaction)
}

// Result records the digest of the raw result bytes (never the bytes).
func (b Builder) Result(r *mcpreadyv1.Receipt, result []byte) {
	r.ResultDigest = b.Redaction.digest(result)
}

// Finish sets ended_at, latency (from started_at) and emitted_at to end,
// and attempt_count from the attempts when it is unset.
func (b Builder) Finish(r *mcpreadyv1.Receipt, end time.Time) {
	f := &finished{}
	f.ts.Seconds, f.ts.Nanos = end.Unix(), int32(end.Nanosecond()) // timestamppb.New(end)
	r.EndedAt, r.EmittedAt = &f.ts, &f.ts
	if r.StartedAt != nil {
		d := end.Sub(r.StartedAt.AsTime())
		nanos := d.Nanoseconds() // durationpb.New(d)
		f.latency.Seconds, f.latency.Nanos = nanos/1e9, int32(nanos%1e9)
		r.Latency = &f.latency
	}
	if r.AttemptCount == 0 {
		r.AttemptCount = int32(len(r.Attempts))
	}
}

// Redact fills r.arguments_digest and r.kept_arguments from args under pol
// and sets r.redaction_policy_version. Kept string values are stored as the
// string; other kept values as canonical JSON.
func Redact(r *mcpreadyv1.Receipt, args json.RawMessage, pol Redaction) {
	r.RedactionPolicyVersion = pol.version()
	r.ArgumentsDigest = pol.digest(args)
	r.KeptArguments = nil
	if len(pol.KeepArguments) == 0 || len(args) == 0 {
		return
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(args, &fields) != nil {
		return
	}
	for _, name := range pol.KeepArguments {
		v, ok := fields[name]
		if !ok {
			continue
		}
		var s string
		if json.Unmarshal(v, &s) != nil {
			c, err := canonjson.Transform(v)
			if err != nil {
				continue
			}
			s = string(c)
		}
		if r.KeptArguments == nil {
			r.KeptArguments = map[string]string{}
		}
		r.KeptArguments[name] = s
	}
}

// ArgumentsDigest is the digest of the RFC 8785 canonical JSON of args
// (the same bytes as artifact.Canonicalize), or of the raw bytes when they
// are not valid JSON. Empty args digest as "{}". It is artifact.Digest of
// those bytes, computed in reused buffers.
func ArgumentsDigest(args json.RawMessage) string {
	buf := digestBufs.Get().(*[]byte)
	defer putDigestBuf(buf)
	*buf = appendDigestInput((*buf)[:0], args)
	sum := sha256.Sum256(*buf)
	var out [len("sha256:") + 2*sha256.Size]byte
	copy(out[:], "sha256:")
	hex.Encode(out[len("sha256:"):], sum[:])
	return string(out[:])
}

// KeyedDigest is the keyed receipt digest of arguments or a result:
// "hmac-sha256:" and the hex HMAC-SHA256 under key of the same bytes
// ArgumentsDigest hashes (RFC 8785 canonical JSON when b is JSON, "{}"
// when empty, else the bytes). Compliance computes it from a guessed value
// and the organisation's key and compares it with the receipt.
func KeyedDigest(key, b []byte) string {
	buf := digestBufs.Get().(*[]byte)
	defer putDigestBuf(buf)
	*buf = appendDigestInput((*buf)[:0], b)
	m := hmac.New(sha256.New, key) // crypto/hmac: its FIPS checks hold for the key
	m.Write(*buf)
	var sum [sha256.Size]byte
	var out [len("hmac-sha256:") + 2*sha256.Size]byte
	copy(out[:], "hmac-sha256:")
	hex.Encode(out[len("hmac-sha256:"):], m.Sum(sum[:0]))
	return string(out[:])
}

// digestBufs hold canonical JSON while it is digested.
var digestBufs = sync.Pool{New: func() any { return new([]byte) }}

func putDigestBuf(buf *[]byte) {
	if cap(*buf) <= 64<<10 {
		digestBufs.Put(buf)
	}
}

// appendDigestInput appends what a receipt digest is computed over to
// dst: the canonical JSON of b when b is JSON, "{}" when b is empty, else
// b itself.
func appendDigestInput(dst, b []byte) []byte {
	if len(b) == 0 {
		b = []byte("{}")
	}
	c, err := canonjson.Append(dst, b)
	if err != nil {
		return append(c[:len(dst)], b...)
	}
	return c
}

var secretPattern = regexp.MustCompile(`(?i)(bearer\s+|basic\s+|token[=:]\s*|api[_-]?key[=:]\s*|authorization[=:]\s*(?:bearer\s+|basic\s+)?|password[=:]\s*)[^\s,;"']*[^\s,;"')\]}>]`)

// SafeError returns msg fit for Receipt.error_message: credential-looking
// values ("Bearer x", "token=x", ...) replaced by "[redacted]" (brackets
// closing right after a value are kept) and the length bounded. It is a backstop, not the redaction: msg must already be
// classified text (a *validate.Outcome's Error(), which names the class,
// the code and the agent's own observation but never the upstream's error
// message or result text). Callers must never pass raw tool output.
func SafeError(msg string) string {
	msg = secretPattern.ReplaceAllString(msg, "${1}[redacted]")
	if len(msg) > maxErrorMessage {
		msg = msg[:maxErrorMessage] + "…"
	}
	return msg
}

// NewID is ledger.NewID: a unique, time-ordered receipt id.
func NewID() string { return ledger.NewID() }

// MaxNameBytes bounds a name a client chose (a requested tool, a resource
// URI) as a receipt records it (BoundName).
const MaxNameBytes = 512

// BoundName is name when it is at most MaxNameBytes, else its first bytes
// (whole UTF-8 characters) followed by "…sha256:" and 16 hex digits of
// the whole name's SHA-256, MaxNameBytes at most: receipts stay small
// whatever a client sends, and two long names that differ stay apart.
func BoundName(name string) string {
	if len(name) <= MaxNameBytes {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	tail := "…sha256:" + hex.EncodeToString(sum[:8])
	cut := MaxNameBytes - len(tail)
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return name[:cut] + tail
}
