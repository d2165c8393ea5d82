package chainhead_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/chainhead"
	"github.com/mcpready/mcpready/ledger"
)

// head is the chain head of agent's batch seq: its sequence and the digest
// of its signed bundle (a stand-in bundle here).
func head(agent string, seq uint64) ledger.Head {
	return ledger.Head{Sequence: seq, Digest: artifact.Digest(fmt.Appendf(nil, `{"batch":"%s/%d"}`, agent, seq))}
}

// Two replicas receive host-1's batches. Each reads the head, checks the
// batch against it (package ingest does) and advances it by
// compare-and-swap: the replica whose read is stale is refused with the
// current state, and re-checks its batch against that (here: the same
// batch, a resend). Store, on etcd, keeps the same contract across
// processes.
func ExampleMemory_Advance() {
	ctx := context.Background()
	heads := chainhead.NewMemory(chainhead.Options{Keep: 2})

	st, _ := heads.Get(ctx, "host-1")
	fmt.Printf("empty: seq %d version %d\n", st.Sequence, st.Version)
	st, err := heads.Advance(ctx, "host-1", st, head("host-1", 1))
	fmt.Printf("advanced: seq %d version %d %v\n", st.Sequence, st.Version, err)

	// Both replicas read the head at sequence 1 ...
	a, _ := heads.Get(ctx, "host-1")
	b, _ := heads.Get(ctx, "host-1")
	// ... and both try to accept batch 2; replica A wins.
	st, err = heads.Advance(ctx, "host-1", a, head("host-1", 2))
	fmt.Printf("replica A: seq %d version %d %v\n", st.Sequence, st.Version, err)
	cur, err := heads.Advance(ctx, "host-1", b, head("host-1", 2))
	fmt.Printf("replica B: %v; now seq %d version %d\n", errors.Is(err, chainhead.ErrConflict), cur.Sequence, cur.Version)
	fmt.Println("replica B's batch is a resend:", cur.Head == head("host-1", 2))

	// A head that does not directly follow its base is refused.
	_, err = heads.Advance(ctx, "host-1", cur, head("host-1", 4))
	fmt.Println(err)

	// Digests are kept for the last Keep batches only.
	if _, err := heads.Advance(ctx, "host-1", cur, head("host-1", 3)); err != nil {
		panic(err)
	}
	for seq := uint64(1); seq <= 3; seq++ {
		d, ok, _ := heads.BatchDigest(ctx, "host-1", seq)
		fmt.Println(seq, ok, d == head("host-1", seq).Digest)
	}
	// Output:
	// empty: seq 0 version 0
	// advanced: seq 1 version 1 <nil>
	// replica A: seq 2 version 2 <nil>
	// replica B: true; now seq 2 version 2
	// replica B's batch is a resend: true
	// invalid chain head advance: sequence 4 after 2
	// 1 false false
	// 2 true true
	// 3 true true
}
