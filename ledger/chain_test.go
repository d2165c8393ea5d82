package ledger

import (
	"errors"
	"sort"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

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

func batch(seq uint64, prev string, n int) (*mcpreadyv1.ReceiptBatch, [][]byte) {
	b := &mcpreadyv1.ReceiptBatch{AgentId: "agent-1", Sequence: seq, BatchId: NewID(), PrevBatchDigest: prev}
	var enc [][]byte
	for i := 0; i < n; i++ {
		r := &mcpreadyv1.Receipt{ReceiptId: NewID(), EmitterId: "agent-1", EmittedAt: timestamppb.New(time.Unix(100, 0))}
		e, _ := Encode(r)
		enc = append(enc, e)
		b.ReceiptDigests = append(b.ReceiptDigests, Digest(e))
	}
	return b, enc
}

func TestOpen(t *testing.T) {
	ok, okEnc := batch(1, "", 3)
	rs, err := Open("agent-1/1", ok, okEnc)
	if err != nil || len(rs) != 3 {
		t.Fatal(rs, err)
	}
	edited := append([][]byte(nil), okEnc...)
	r := &mcpreadyv1.Receipt{}
	proto.Unmarshal(edited[1], r)
	r.Requested = "other"
	edited[1], _ = Encode(r)
	dupB, dupEnc := batch(1, "", 2)
	dupEnc[1] = dupEnc[0]
	dupB.ReceiptDigests[1] = dupB.ReceiptDigests[0]
	inlined, inlEnc := batch(1, "", 1)
	inlined.Receipts = []*mcpreadyv1.Receipt{{}}
	garbage, garbageEnc := batch(1, "", 1)
	garbageEnc[0] = []byte{0xff, 0xff}
	garbage.ReceiptDigests[0] = Digest(garbageEnc[0])
	for _, tc := range []struct {
		name  string
		sname string
		b     *mcpreadyv1.ReceiptBatch
		enc   [][]byte
		want  ChainReason
	}{
		{"edited receipt", "agent-1/1", ok, edited, ReasonDigestMismatch},
		{"removed receipt", "agent-1/1", ok, okEnc[:2], ReasonDigestMismatch},
		{"reordered receipts", "agent-1/1", ok, [][]byte{okEnc[1], okEnc[0], okEnc[2]}, ReasonDigestMismatch},
		{"duplicate receipt", "agent-1/1", dupB, dupEnc, ReasonDuplicateReceipt},
		{"inlined receipts", "agent-1/1", inlined, inlEnc, ReasonDigestMismatch},
		{"undecodable receipt", "agent-1/1", garbage, garbageEnc, ReasonDigestMismatch},
		{"wrong name", "agent-2/1", ok, okEnc, ReasonBadName},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open(tc.sname, tc.b, tc.enc)
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
		{"first", Head{}, mb(1, ""), "sha256:a", false, ""},
		{"first not 1", Head{}, mb(2, ""), "x", false, ReasonGap},
		{"next", head, mb(3, "sha256:b"), "sha256:c", false, ""},
		{"gap", head, mb(4, "sha256:b"), "sha256:c", false, ReasonGap},
		{"wrong prev", head, mb(3, "sha256:a"), "sha256:c", false, ReasonFork},
		{"resend", head, mb(2, "sha256:a"), "sha256:b", true, ""},
		{"fork at old seq", head, mb(2, "sha256:a"), "sha256:z", false, ReasonFork},
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
	if _, err := head.Next(mb(1, ""), "q", nil); err == nil {
		t.Fatal("replay without lookup must fail")
	}
}

func mb(seq uint64, prev string) *mcpreadyv1.ReceiptBatch {
	b, _ := batch(seq, prev, 0)
	return b
}
