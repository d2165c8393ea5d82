package export

import (
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/ledger"
	"github.com/mcpready/mcpready/sign"
)

// Failure names the batch that failed verification.
type Failure struct {
	// Input names the export the batch is in (Input.Name; empty for Verify).
	Input    string
	Line     int
	BatchID  string
	AgentID  string
	Sequence uint64
	// Reason is a sign.Reason, a ledger.ChainReason, "mismatch" or
	// "reordered".
	Reason string
	Detail string
}

func (f *Failure) Error() string {
	where := fmt.Sprintf("line %d", f.Line)
	if f.Input != "" {
		where = f.Input + ":" + fmt.Sprint(f.Line)
	}
	return fmt.Sprintf("%s: batch %s (agent %s, sequence %d): %s: %s", where, f.BatchID, f.AgentID, f.Sequence, f.Reason, f.Detail)
}

// AgentSummary describes one agent's verified chain segment.
type AgentSummary struct {
	AgentID              string
	Batches, Receipts    int
	FirstSeq, LastSeq    uint64
	HeadDigest           string
	StartsMidChain       bool
	FirstPrevBatchDigest string
}

// Verifier verifies one bundle (sign.VerifyWithKey with an agent key, or a
// sign.Trust's Verify at a chosen time).
type Verifier func(bundle []byte) (*sign.Verified, error)

// Input is one export to verify.
type Input struct {
	Name string // for failures, e.g. the file name
	R    io.Reader
}

// Verify checks every batch in r and returns a summary per agent, sorted.
// An export that starts in the middle of an agent's chain (e.g. --since)
// is accepted from its first batch; StartsMidChain says so.
func Verify(r io.Reader, verify Verifier) ([]AgentSummary, error) {
	return VerifyAll([]Input{{R: r}}, verify)
}

// verified is one batch whose signature and receipts checked out.
type verified struct {
	input, line int
	l           ledger.Batch // without receipts
	batch       *mcpreadyv1.ReceiptBatch
	digest      string
	receipts    int
}

// VerifyAll is Verify over several exports of the same chains, for example
// one per control-plane replica (an agent's batches are stored by the
// replica that received them). Each export must hold each agent's batches
// in chain order, as the export command writes them; across exports they
// are merged by sequence, and a batch found in more than one export
// (byte-identical, as when two replicas both stored it) counts once. The
// merged chains must have no gap, fork or replay.
func VerifyAll(inputs []Input, verify Verifier) ([]AgentSummary, error) {
	var all []verified
	// A batch that fails on its own ends the reading; in a single export
	// the chain read so far is still checked, so that the first failing
	// batch is named (with several, what is not read yet is not a gap).
	var pending error
	for in, input := range inputs {
		last := map[string]uint64{}          // agent -> last sequence in this input
		seen := map[string]map[uint64]bool{} // agent -> sequences in this input
		err := Read(input.R, func(n int, l ledger.Batch) error {
			fail := func(reason, format string, args ...any) error {
				return &Failure{Input: input.Name, Line: n, BatchID: l.BatchID, AgentID: l.AgentID, Sequence: l.Sequence, Reason: reason, Detail: fmt.Sprintf(format, args...)}
			}
			v, err := verify(l.Bundle)
			if err != nil {
				reason := string(sign.ReasonOf(err))
				if reason == "" {
					reason = "unverifiable"
				}
				return fail(reason, "%v", err)
			}
			b, ok := v.Object.Spec.(*mcpreadyv1.ReceiptBatch)
			if !ok {
				return fail("wrong-kind", "bundle holds a %s", v.Object.Kind)
			}
			if b.BatchId != l.BatchID || b.AgentId != l.AgentID || b.Sequence != l.Sequence {
				return fail("mismatch", "line says %s/%s/%d, signed batch is %s/%s/%d", l.AgentID, l.BatchID, l.Sequence, b.AgentId, b.BatchId, b.Sequence)
			}
			if _, err := ledger.Open(v.Object.Metadata.Name, b, l.Receipts); err != nil {
				return chainFailure(fail, err)
			}
			if len(inputs) > 1 { // one export is checked in its own order below
				if seen[b.AgentId][b.Sequence] {
					return fail(string(ledger.ReasonReplay), "batch repeated in the export")
				}
				if prev, ok := last[b.AgentId]; ok && b.Sequence < prev {
					return fail("reordered", "sequence %d after %d in the same export", b.Sequence, prev)
				}
				if seen[b.AgentId] == nil {
					seen[b.AgentId] = map[uint64]bool{}
				}
				seen[b.AgentId][b.Sequence], last[b.AgentId] = true, b.Sequence
			}
			nr := len(l.Receipts)
			l.Receipts = nil
			all = append(all, verified{input: in, line: n, l: l, batch: b, digest: artifact.Digest(l.Bundle), receipts: nr})
			return nil
		})
		var f *Failure
		if errors.As(err, &f) && len(inputs) == 1 {
			pending = err
			break
		}
		if err != nil {
			return nil, err
		}
	}
	// Several exports are merged: per agent by sequence, within a sequence
	// in input order. One export keeps its own order, which must be the
	// chain's.
	if len(inputs) > 1 {
		sort.SliceStable(all, func(i, j int) bool {
			a, b := all[i].batch, all[j].batch
			if a.AgentId != b.AgentId {
				return a.AgentId < b.AgentId
			}
			return a.Sequence < b.Sequence
		})
	}
	type chainState struct {
		sum  *AgentSummary
		head ledger.Head
		seen map[uint64]verified
	}
	chains := map[string]*chainState{}
	var out []AgentSummary
	for _, e := range all {
		b := e.batch
		fail := func(reason, format string, args ...any) error {
			return &Failure{Input: inputs[e.input].Name, Line: e.line, BatchID: e.l.BatchID, AgentID: e.l.AgentID, Sequence: e.l.Sequence, Reason: reason, Detail: fmt.Sprintf(format, args...)}
		}
		c := chains[b.AgentId]
		if c == nil {
			c = &chainState{sum: &AgentSummary{AgentID: b.AgentId, FirstSeq: b.Sequence, StartsMidChain: b.Sequence > 1, FirstPrevBatchDigest: b.PrevBatchDigest},
				head: ledger.Head{Sequence: b.Sequence - 1, Digest: b.PrevBatchDigest}, seen: map[uint64]verified{}}
			chains[b.AgentId] = c
		}
		if prev, ok := c.seen[b.Sequence]; ok && prev.digest == e.digest && prev.input != e.input {
			continue // the same batch, stored by two replicas
		}
		dup, err := c.head.Next(b, e.digest, func(seq uint64) (string, bool) { v, ok := c.seen[seq]; return v.digest, ok })
		if dup {
			return nil, fail(string(ledger.ReasonReplay), "batch repeated in the export")
		}
		if err != nil {
			return nil, chainFailure(fail, err)
		}
		c.head = ledger.Head{Sequence: b.Sequence, Digest: e.digest}
		c.seen[b.Sequence] = e
		c.sum.Batches++
		c.sum.Receipts += e.receipts
		c.sum.LastSeq, c.sum.HeadDigest = b.Sequence, e.digest
	}
	if pending != nil {
		return nil, pending
	}
	out = make([]AgentSummary, 0, len(chains))
	for _, c := range chains {
		out = append(out, *c.sum)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].AgentID < out[j].AgentID })
	return out, nil
}

func chainFailure(fail func(string, string, ...any) error, err error) error {
	var ce *ledger.ChainError
	if errors.As(err, &ce) {
		return fail(string(ce.Reason), "%s", ce.Detail)
	}
	return fail("invalid", "%v", err)
}
