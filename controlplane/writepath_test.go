package controlplane_test

import (
	"context"
	"crypto"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/admin"
	"github.com/mcpready/mcpready/controlplane/aggregate"
	"github.com/mcpready/mcpready/controlplane/lifecycle"
	"github.com/mcpready/mcpready/controlplane/store"
	"github.com/mcpready/mcpready/controlplane/writer"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/etcdtest"
	"github.com/mcpready/mcpready/internal/testpki"
	"github.com/mcpready/mcpready/sign"
)

// TestEveryWriterGoesThroughTheWriter: the Admin API, the registry
// lifecycle and passive-evidence aggregation all write through one
// writer.Writer, so an artifact signed by a key the TrustPolicy does not
// know is refused from each of them and nothing is stored.
func TestEveryWriterGoesThroughTheWriter(t *testing.T) {
	cli, _ := etcdtest.Etcd(t)
	st := store.New(cli, store.Options{})
	p := testpki.New(t)
	ctx := context.Background()
	w, err := writer.New(writer.Options{Store: st, Root: p.Root.Public()})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.Apply(ctx, p.TrustPolicy); err != nil {
		t.Fatal(err)
	}
	stranger, err := sign.GenerateKey(sign.AlgorithmEd25519)
	if err != nil {
		t.Fatal(err)
	}
	count := func(k artifact.Kind) int {
		t.Helper()
		recs, _, err := st.List(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		return len(recs)
	}

	// Admin.
	adm := admin.New(admin.Options{Writer: w})
	_, err = adm.Apply(ctx, &mcpreadyv1.ApplyRequest{Bundle: testpki.Sign(t, testpki.Policy("org/p", "1", nil), stranger)})
	if status.Code(err) != codes.PermissionDenied || count(artifact.KindPolicy) != 0 {
		t.Fatalf("admin: %v, %d policies stored", err, count(artifact.KindPolicy))
	}

	// Lifecycle: its suspension copy, signed by an unknown observer key.
	entry := &mcpreadyv1.RegistryEntry{Identity: &mcpreadyv1.ToolIdentity{ServerName: "com.example/docs", ServerVersion: "1", ToolName: "lookup"},
		State: mcpreadyv1.LifecycleState_LIFECYCLE_STATE_QUALIFIED}
	if _, _, err := w.Apply(ctx, testpki.Sign(t, artifact.New(artifact.KindRegistryEntry, "lookup@1", entry), p.Org)); err != nil {
		t.Fatal(err)
	}
	lc, err := lifecycle.New(lifecycle.Options{Writer: w, Signer: stranger})
	if err != nil {
		t.Fatal(err)
	}
	cur, err := st.Get(ctx, artifact.KindRegistryEntry, "lookup@1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = lc.ReportDrift(ctx, testpki.DriftReport(t, p.Agent, "host-1", "lookup@1", cur.Digest, []mcpreadyv1.DriftLabel{mcpreadyv1.DriftLabel_DRIFT_LABEL_VERSION_DRIFT},
		&mcpreadyv1.ToolIdentity{ServerName: "com.example/docs", ServerVersion: "2", ToolName: "lookup"}, time.Now()))
	if sign.ReasonOf(err) != sign.ReasonUnknownKey {
		t.Fatalf("lifecycle: %v", err)
	}
	if h, _ := st.History(ctx, artifact.KindRegistryEntry, "lookup@1"); len(h) != 1 || count(artifact.KindRegistryEntry) != 1 {
		t.Fatalf("lifecycle stored: %d revisions, %d entries", len(h), count(artifact.KindRegistryEntry))
	}

	// Aggregation: passive evidence signed by an unknown key, then by the
	// granted observer key (which is stored).
	now := time.Now()
	rc := &mcpreadyv1.Receipt{Outcome: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS, AttemptCount: 1, EndedAt: timestamppb.New(now),
		Selected: &mcpreadyv1.Selection{ServerName: "com.example/docs", ServerVersion: "1", ToolName: "lookup"}}
	for _, c := range []struct {
		key    crypto.Signer
		stored int
	}{{stranger, 0}, {p.Observer, 1}} {
		agg, err := aggregate.New(aggregate.Options{Signer: c.key, Sink: w, Subjects: aggregate.SubjectFunc(func(*mcpreadyv1.Selection) bool { return true })})
		if err != nil {
			t.Fatal(err)
		}
		agg.Observe("host-1", []*mcpreadyv1.Receipt{rc}, []string{"sha256:00"})
		_, err = agg.Flush(ctx, true)
		if (c.stored == 0) != (err != nil) || count(artifact.KindEvidence) != c.stored {
			t.Fatalf("aggregate: %v, %d evidence stored, want %d", err, count(artifact.KindEvidence), c.stored)
		}
	}

	// The evidence sink takes nothing but Evidence.
	if err := w.ApplyEvidence(ctx, testpki.Sign(t, testpki.Policy("org/p", "1", nil), p.Org)); !errors.Is(err, writer.ErrWrongKind) || count(artifact.KindPolicy) != 0 {
		t.Fatalf("evidence sink took a Policy: %v", err)
	}
}
