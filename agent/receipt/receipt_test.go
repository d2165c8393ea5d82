package receipt

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/ledger"
)

func TestRedactKeepsOnlyAllowListedFields(t *testing.T) {
	const secret = "sk-SECRET-123"
	args := json.RawMessage(`{"query":"mcp spec","token":"` + secret + `","limit":5,"opts":{"b":1,"a":2}}`)
	tests := []struct {
		name string
		keep []string
		want map[string]string
	}{
		{"default keeps nothing", nil, nil},
		{"string kept verbatim", []string{"query"}, map[string]string{"query": "mcp spec"}},
		{"non-strings as canonical json", []string{"limit", "opts", "absent"}, map[string]string{"limit": "5", "opts": `{"a":2,"b":1}`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Builder{Redaction: Redaction{KeepArguments: tc.keep}}.Start(time.Now())
			Redact(r, args, Redaction{KeepArguments: tc.keep})
			if len(r.KeptArguments) != len(tc.want) {
				t.Fatalf("kept %v, want %v", r.KeptArguments, tc.want)
			}
			for k, v := range tc.want {
				if r.KeptArguments[k] != v {
					t.Errorf("kept[%s]=%q want %q", k, r.KeptArguments[k], v)
				}
			}
			c, _ := ledger.Encode(r)
			if strings.Contains(string(c), secret) {
				t.Fatal("secret leaked into receipt")
			}
			if !strings.HasPrefix(r.ArgumentsDigest, "sha256:") {
				t.Fatalf("digest %q", r.ArgumentsDigest)
			}
		})
	}
}

func TestArgumentsDigestIsCanonical(t *testing.T) {
	a := ArgumentsDigest(json.RawMessage(`{"b":1, "a":2}`))
	b := ArgumentsDigest(json.RawMessage(`{"a":2,"b":1}`))
	if a != b {
		t.Fatalf("%s != %s", a, b)
	}
	if ArgumentsDigest(nil) != ArgumentsDigest(json.RawMessage(`{}`)) {
		t.Fatal("empty args must digest as {}")
	}
	if ArgumentsDigest(json.RawMessage(`not json`)) == "" {
		t.Fatal("non-JSON must still digest")
	}
}

func TestSafeError(t *testing.T) {
	got := SafeError("upstream said: Authorization: Bearer abc.def.ghi and token=xyz")
	if strings.Contains(got, "abc.def") || strings.Contains(got, "xyz") {
		t.Fatalf("not redacted: %s", got)
	}
	if len(SafeError(strings.Repeat("x", 5000))) > maxErrorMessage+4 {
		t.Fatal("not bounded")
	}
}

// TestDigestsMatchDefinition: the digests computed in reused buffers are
// exactly their definitions (artifact.Digest of the canonical JSON, or of
// the raw bytes when not JSON; HMAC-SHA256 of the same bytes), call after
// call, whatever was digested before.
func TestDigestsMatchDefinition(t *testing.T) {
	keys := [][]byte{[]byte("k"), []byte(strings.Repeat("k", 32)), []byte(strings.Repeat("\xff", 64)),
		[]byte(strings.Repeat("k", 65)), []byte(strings.Repeat("key", 100))}
	inputs := []string{`{"b":1, "a":[2,{"d":"\u00e9","c":null}]}`, `{"text":"benchmark"}`, ``, `not json`, `{"a":1,"a":2}`,
		`"esc\"aped\\"`, strings.Repeat(`{"x":`, 50) + `1` + strings.Repeat(`}`, 50)}
	for range 2 {
		for _, in := range inputs {
			want := []byte(in)
			if len(want) == 0 {
				want = []byte("{}")
			}
			if c, err := artifact.Canonicalize(want); err == nil {
				want = c
			}
			if got, w := ArgumentsDigest(json.RawMessage(in)), artifact.Digest(want); got != w {
				t.Errorf("ArgumentsDigest(%q) = %s, want %s", in, got, w)
			}
			for _, key := range keys {
				m := hmac.New(sha256.New, key)
				m.Write(want)
				if got, w := KeyedDigest(key, []byte(in)), "hmac-sha256:"+hex.EncodeToString(m.Sum(nil)); got != w {
					t.Errorf("KeyedDigest(%d-byte key, %q) = %s, want %s", len(key), in, got, w)
				}
			}
		}
	}
}

// TestStartFinishTimes: the times Start and Finish write in place are
// exactly timestamppb.New and durationpb.New of them, for latencies
// positive, sub-second, negative (a clock stepped back) and zero.
func TestStartFinishTimes(t *testing.T) {
	start := time.Date(2026, 12, 1, 21, 0, 0, 123456789, time.UTC)
	for _, d := range []time.Duration{1500 * time.Millisecond, 42 * time.Microsecond, -1700 * time.Millisecond, -3, 0} {
		var b Builder
		r := b.Start(start)
		if !proto.Equal(r.GetStartedAt(), timestamppb.New(start)) || r.GetEmittedAt() != r.GetStartedAt() {
			t.Fatalf("start %v: started_at %v, emitted_at %v", start, r.GetStartedAt(), r.GetEmittedAt())
		}
		end := start.Add(d)
		b.Finish(r, end)
		if !proto.Equal(r.GetEndedAt(), timestamppb.New(end)) || !proto.Equal(r.GetEmittedAt(), timestamppb.New(end)) {
			t.Errorf("%v: ended_at %v, emitted_at %v", d, r.GetEndedAt(), r.GetEmittedAt())
		}
		if !proto.Equal(r.GetLatency(), durationpb.New(d)) || r.GetLatency().AsDuration() != d {
			t.Errorf("%v: latency %v, want %v", d, r.GetLatency(), durationpb.New(d))
		}
		if !proto.Equal(r.GetStartedAt(), timestamppb.New(start)) {
			t.Errorf("%v: Finish changed started_at to %v", d, r.GetStartedAt())
		}
	}
}

// A redacted value keeps the brackets that close around it: before, the
// value ran up to the next space or separator, so "(token=abc)" lost its
// ")" and "[Bearer abc]" its "]". A bracket inside the value is still part
// of what is redacted.
func TestSafeErrorKeepsClosingBrackets(t *testing.T) {
	for in, want := range map[string]string{
		"refused (token=abc)":             "refused (token=[redacted])",
		"refused [Bearer abc.def]; retry": "refused [Bearer [redacted]]; retry",
		"{api_key: k1}} and <password=p>": "{api_key: [redacted]}} and <password=[redacted]>",
		"token=ab)cd rest":                "token=[redacted] rest",
		"token=) rest":                    "token=) rest",
	} {
		if got := SafeError(in); got != want {
			t.Errorf("SafeError(%q) = %q, want %q", in, got, want)
		}
	}
}
