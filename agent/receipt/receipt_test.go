package receipt

import (
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
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
			c, _ := CanonicalJSON(r)
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

func TestNewIDSortedAndUnique(t *testing.T) {
	ids := make([]string, 10000)
	seen := map[string]bool{}
	for i := range ids {
		ids[i] = NewID()
		if seen[ids[i]] || len(ids[i]) != 26 {
			t.Fatalf("bad id %q", ids[i])
		}
		seen[ids[i]] = true
	}
	if !sort.StringsAreSorted(ids) {
		t.Fatal("ids not time-ordered")
	}
}

func batch(seq uint64, prev string, n int) *mcpreadyv1.ReceiptBatch {
	b := &mcpreadyv1.ReceiptBatch{AgentId: "agent-1", Sequence: seq, BatchId: NewID(), PrevBatchDigest: prev}
	for i := 0; i < n; i++ {
		r := Builder{EmitterID: "agent-1"}.Start(time.Unix(100, 0))
		d, _ := Digest(r)
		b.Receipts = append(b.Receipts, r)
		b.ReceiptDigests = append(b.ReceiptDigests, d)
	}
	return b
}

func TestCheckContent(t *testing.T) {
	ok := batch(1, "", 3)
	if err := CheckContent("agent-1/1", ok); err != nil {
		t.Fatal(err)
	}
	edited := batch(1, "", 3)
	edited.Receipts[1].Requested = "other"
	removed := batch(1, "", 3)
	removed.Receipts = removed.Receipts[:2]
	dup := batch(1, "", 2)
	dup.Receipts[1].ReceiptId = dup.Receipts[0].ReceiptId
	dup.ReceiptDigests[1], _ = Digest(dup.Receipts[1])
	for _, tc := range []struct {
		name  string
		sname string
		b     *mcpreadyv1.ReceiptBatch
		want  ChainReason
	}{
		{"edited receipt", "agent-1/1", edited, ReasonDigestMismatch},
		{"removed receipt", "agent-1/1", removed, ReasonDigestMismatch},
		{"duplicate receipt", "agent-1/1", dup, ReasonDuplicateReceipt},
		{"wrong name", "agent-2/1", ok, ReasonBadName},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckContent(tc.sname, tc.b)
			var ce *ChainError
			if !errors.As(err, &ce) || ce.Reason != tc.want || !errors.Is(err, ErrChain) {
				t.Fatalf("got %v, want %s", err, tc.want)
			}
		})
	}
}

func TestHeadNext(t *testing.T) {
	accepted := map[uint64]string{1: "sha256:a", 2: "sha256:b"}
	lookup := func(s uint64) (string, bool) { d, ok := accepted[s]; return d, ok }
	head := Head{Sequence: 2, Digest: "sha256:b"}
	for _, tc := range []struct {
		name   string
		head   Head
		b      *mcpreadyv1.ReceiptBatch
		digest string
		dup    bool
		reason ChainReason
	}{
		{"first", Head{}, batch(1, "", 0), "sha256:a", false, ""},
		{"first not 1", Head{}, batch(2, "", 0), "x", false, ReasonGap},
		{"next", head, batch(3, "sha256:b", 0), "sha256:c", false, ""},
		{"gap", head, batch(4, "sha256:b", 0), "sha256:c", false, ReasonGap},
		{"wrong prev", head, batch(3, "sha256:a", 0), "sha256:c", false, ReasonFork},
		{"resend", head, batch(2, "sha256:a", 0), "sha256:b", true, ""},
		{"fork at old seq", head, batch(2, "sha256:a", 0), "sha256:z", false, ReasonFork},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dup, err := tc.head.Next(tc.b, tc.digest, lookup)
			if dup != tc.dup {
				t.Fatalf("dup=%v", dup)
			}
			var ce *ChainError
			if tc.reason == "" && err != nil || tc.reason != "" && (!errors.As(err, &ce) || ce.Reason != tc.reason) {
				t.Fatalf("err %v, want %q", err, tc.reason)
			}
		})
	}
	if _, err := head.Next(batch(1, "", 0), "q", nil); err == nil {
		t.Fatal("replay without lookup must fail")
	}
}
