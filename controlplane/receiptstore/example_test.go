package receiptstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/receiptstore"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/ledger"
)

var day1 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// batch is agent's batch seq as ingest hands it to Append after verifying
// it: the signed bundle (here a stand-in: the store neither verifies nor
// parses it, only keeps it byte for byte), its digest, and the encoded
// receipts, one per tool call.
func batch(agent string, seq uint64, received time.Time, tools ...string) *ledger.Batch {
	bundle := fmt.Appendf(nil, `{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","batch":"%s/%d","receipts":%d}`, agent, seq, len(tools))
	b := &ledger.Batch{
		BatchID: fmt.Sprintf("%s-b%d", agent, seq), AgentID: agent, Sequence: seq,
		Bundle: bundle, Digest: artifact.Digest(bundle), Received: received,
	}
	for i, tool := range tools {
		enc, err := ledger.Encode(&mcpreadyv1.Receipt{
			ReceiptId:  fmt.Sprintf("r-%s-%d-%d", agent, seq, i),
			WorkflowId: fmt.Sprintf("wf-%s-%d", agent, seq),
			EmittedAt:  timestamppb.New(received.Add(-time.Minute + time.Duration(i)*time.Second)),
			Selected:   &mcpreadyv1.Selection{ServerName: "io.github.acme/docs", ToolName: tool},
		})
		if err != nil {
			panic(err)
		}
		b.Receipts = append(b.Receipts, enc)
	}
	return b
}

func ids(rs []*mcpreadyv1.StoredReceipt) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Receipt.GetReceiptId())
	}
	return out
}

// Batches are stored as agents' chains advance; an exact resend is a
// duplicate and a batch id reused for other content a conflict. Queries
// filter receipts and page back from the newest.
func ExampleStore_Query() {
	dir, err := os.MkdirTemp("", "receipts")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	s, err := receiptstore.Open(dir, receiptstore.Options{Now: func() time.Time { return day1 }})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	for _, b := range []*ledger.Batch{
		batch("host-1", 1, day1, "search", "fetch"),
		batch("host-2", 1, day1.Add(time.Minute), "search"),
		batch("host-1", 2, day1.Add(2*time.Minute), "search", "search", "fetch"),
	} {
		if _, err := s.Append(b, nil, nil); err != nil {
			panic(err)
		}
	}
	res, err := s.Append(batch("host-1", 2, day1.Add(2*time.Minute), "search", "search", "fetch"), nil, nil)
	fmt.Println("resend:", res.Duplicate, err)
	_, err = s.Append(batch("host-1", 2, day1.Add(3*time.Minute), "fetch"), nil, nil)
	fmt.Println("same id, other content:", errors.Is(err, receiptstore.ErrConflict))
	st := s.Stats()
	fmt.Println("batches", st.Batches, "receipts", st.Receipts, "agents", st.Agents)
	fmt.Println("host-1 head:", s.Head("host-1").Sequence, s.Head("host-1").Digest == batch("host-1", 2, day1, "search", "search", "fetch").Digest)

	ctx := context.Background()
	rs, _, err := s.Query(ctx, receiptstore.Query{ToolName: "search", AgentID: "host-1"})
	fmt.Println("host-1 search:", ids(rs), err)
	rs, _, err = s.Query(ctx, receiptstore.Query{WorkflowID: "wf-host-2-1"})
	fmt.Println("workflow wf-host-2-1:", ids(rs), rs[0].GetBatchId(), err)

	// Pages of two, newest first; each page's cursor asks for the one
	// before. A page that fills its limit always has a cursor, so the last
	// page may be empty.
	q := receiptstore.Query{Limit: 2}
	for page := 1; ; page++ {
		rs, next, err := s.Query(ctx, q)
		if err != nil {
			panic(err)
		}
		fmt.Println("page", page, ids(rs))
		if next == "" {
			break
		}
		q.Before = next
	}

	r, err := s.Get("r-host-1-2-2")
	fmt.Println(r.GetBatchId(), r.GetAgentId(), r.GetReceipt().GetSelected().GetToolName(), err)
	_, err = s.Get("r-host-9-1-0")
	fmt.Println(errors.Is(err, receiptstore.ErrNotFound))
	// Output:
	// resend: true <nil>
	// same id, other content: true
	// batches 3 receipts 6 agents 2
	// host-1 head: 2 true
	// host-1 search: [r-host-1-1-0 r-host-1-2-0 r-host-1-2-1] <nil>
	// workflow wf-host-2-1: [r-host-2-1-0] host-2-b1 <nil>
	// page 1 [r-host-1-2-1 r-host-1-2-2]
	// page 2 [r-host-2-1-0 r-host-1-2-0]
	// page 3 [r-host-1-1-0 r-host-1-1-1]
	// host-1-b2 host-1 fetch <nil>
	// true
}

// With Options.Retention, ApplyRetention (which the control plane runs
// periodically) deletes whole old segments; the agents' chain heads
// survive, so their next batches still chain on.
func ExampleStore_ApplyRetention() {
	dir, err := os.MkdirTemp("", "receipts")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	now := day1
	s, err := receiptstore.Open(dir, receiptstore.Options{
		Retention:    7 * 24 * time.Hour,
		SegmentBytes: 256, // tiny, so that each batch starts a segment
		Now:          func() time.Time { return now },
	})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	for seq, age := range []int{0, 2, 9} { // received on days 1, 3 and 10
		b := batch("host-1", uint64(seq+1), day1.AddDate(0, 0, age), "search")
		if _, err := s.Append(b, nil, nil); err != nil {
			panic(err)
		}
	}
	all := func() []string {
		rs, _, err := s.Query(context.Background(), receiptstore.Query{})
		if err != nil {
			panic(err)
		}
		return ids(rs)
	}
	fmt.Println("segments", s.Stats().Segments, all())

	now = day1.AddDate(0, 0, 11) // day 12: days 1 and 3 are over a week ago
	n, err := s.ApplyRetention()
	fmt.Println("deleted", n, err)
	fmt.Println("segments", s.Stats().Segments, all())
	fmt.Println("head", s.Head("host-1").Sequence)
	// Output:
	// segments 3 [r-host-1-1-0 r-host-1-2-0 r-host-1-3-0]
	// deleted 2 <nil>
	// segments 1 [r-host-1-3-0]
	// head 3
}
