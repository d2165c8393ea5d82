package subscribe

import (
	"context"
	"crypto"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/agent/internal/cptest"
	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/testpki"
	"github.com/mcpready/mcpready/sign"
)

// sample is an artifact of kind k at version; salt changes its content,
// expires sets provenance.expiresAt.
func sample(k artifact.Kind, name, version, salt string, expires time.Time) *artifact.Object {
	pv := &mcpreadyv1.Provenance{Issuer: "test" + salt, Version: version}
	if !expires.IsZero() {
		pv.ExpiresAt = timestamppb.New(expires)
	}
	return testpki.Versioned(k, name, nil, pv)
}

func offer(c *Client, k artifact.Kind, name string, b []byte) error {
	return c.Apply(k, []*mcpreadyv1.Resource{{Name: name, TypeUrl: k.TypeURL(), Version: "x", Bundle: b}}, nil, k == artifact.KindTrustPolicy)
}

func heldVersion(c *Client, k artifact.Kind, name string) string {
	r := c.Snapshot().Get(k, name)
	if r == nil {
		return "<none>"
	}
	return r.Verified.Object.Version()
}

// TestAgentRefusesReplayEveryKind replays each kind at an older version,
// at an equal version with other content, unversioned and expired: each
// is NACKed with its reason and the held version stays; the same holds
// after a removal, across a restart, and when the last known good file is
// rewritten with older bundles.
func TestAgentRefusesReplayEveryKind(t *testing.T) {
	env := cptest.Start(t)
	for _, k := range []artifact.Kind{artifact.KindTrustPolicy, artifact.KindDeclaration, artifact.KindRegistryEntry, artifact.KindPolicy, artifact.KindEvidence} {
		t.Run(string(k), func(t *testing.T) {
			dir := t.TempDir()
			lkg := filepath.Join(dir, "lkg.json")
			opts := Options{Root: env.RootPub, Node: &mcpreadyv1.Node{Id: "n"}, LKGPath: lkg}
			c, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			name := "org/x"
			if k != artifact.KindTrustPolicy {
				if err := offer(c, artifact.KindTrustPolicy, "default", env.Sign(sample(artifact.KindTrustPolicy, "default", "1", "", time.Time{}))); err != nil {
					t.Fatal(err)
				}
			} else {
				name = "default"
			}
			v2 := env.Sign(sample(k, name, "2", "", time.Time{}))
			if err := offer(c, k, name, v2); err != nil {
				t.Fatal(err)
			}
			v3 := env.Sign(successor(c, sample(k, name, "3", "", time.Time{})))
			oldLKG, err := os.ReadFile(lkg)
			if err != nil {
				t.Fatal(err)
			}
			if err := offer(c, k, name, v3); err != nil {
				t.Fatal(err)
			}
			refused := func(c *Client, label string, b []byte, want error) {
				t.Helper()
				err := offer(c, k, name, b)
				if !errors.Is(err, want) || !errors.Is(err, ErrRejected) {
					t.Errorf("%s: err = %v, want %v", label, err, want)
				}
				if got := heldVersion(c, k, name); got != "3" {
					t.Errorf("%s: held version %q, want 3 kept", label, got)
				}
			}
			refused(c, "older", v2, artifact.ErrRollback)
			refused(c, "equal, other content", env.Sign(successor(c, sample(k, name, "3", "other", time.Time{}))), artifact.ErrRollback)
			refused(c, "unversioned", env.Sign(sample(k, name, "", "", time.Time{})), artifact.ErrRollback)
			if k != artifact.KindTrustPolicy { // an expired TrustPolicy fails verification itself
				refused(c, "expired", env.Sign(sample(k, name, "9", "", time.Now().Add(-time.Minute))), artifact.ErrExpired)
			}
			if err := offer(c, k, name, v3); err != nil {
				t.Errorf("the held bundle again: %v", err)
			}
			if d := nack(offer(c, k, name, v2)); d.GetCode() != int32(codes.FailedPrecondition) || !strings.HasPrefix(strings.TrimPrefix(d.GetMessage(), ErrRejected.Error()+": "), "rollback") {
				t.Errorf("NACK: %v", d)
			}

			// Restart: the marks come back from disk.
			c2, _ := New(opts)
			if dropped, err := c2.Load(); err != nil || dropped != 0 || heldVersion(c2, k, name) != "3" {
				t.Fatalf("restart: dropped %d, %v, held %q", dropped, err, heldVersion(c2, k, name))
			}
			refused(c2, "older after restart", v2, artifact.ErrRollback)

			// A last known good file rewritten with the older bundle.
			if err := os.WriteFile(lkg, oldLKG, 0o600); err != nil {
				t.Fatal(err)
			}
			c3, _ := New(opts)
			if dropped, err := c3.Load(); err != nil || dropped == 0 {
				t.Fatalf("rewritten LKG: dropped %d, %v", dropped, err)
			}
			if got := heldVersion(c3, k, name); got == "2" {
				t.Fatal("rewritten LKG rolled the agent back to version 2")
			}

			// A removal keeps the mark: the removed version cannot come back.
			if k != artifact.KindTrustPolicy {
				if err := c2.Apply(k, nil, []string{name}, false, tombRes(t, env, v3)); err != nil {
					t.Fatal(err)
				}
				if err := offer(c2, k, name, v3); !errors.Is(err, artifact.ErrRollback) && err != nil {
					t.Errorf("re-adding the removed bundle: %v", err)
				}
				if err := offer(c2, k, name, env.Sign(sample(k, name, "4", "", time.Time{}))); err != nil {
					t.Errorf("a newer version after removal: %v", err)
				}
			}
		})
	}
}

// successor makes o, when it is a TrustPolicy, supersede c's active one.
func successor(c *Client, o *artifact.Object) *artifact.Object {
	if tp, ok := o.Spec.(*mcpreadyv1.TrustPolicy); ok && c.Snapshot().Trust != nil {
		ref := c.Snapshot().Trust.Ref()
		tp.Supersedes = &mcpreadyv1.TrustPolicyRef{Name: ref.Name, Version: ref.Version, Digest: ref.Digest}
	}
	return o
}

// trustGranting is a root-signed TrustPolicy "default" at version that
// grants org the Policy kind, revoked when revoked is set; it supersedes
// the one env stores.
func trustGranting(t *testing.T, env *cptest.Env, org crypto.Signer, version string, revoked bool) []byte {
	t.Helper()
	cur, err := env.Store.Get(context.Background(), artifact.KindTrustPolicy, "default")
	if err != nil {
		t.Fatal(err)
	}
	o, err := sign.Peek(cur.Bundle)
	if err != nil {
		t.Fatal(err)
	}
	sup := &mcpreadyv1.TrustPolicyRef{Name: "default", Version: o.Version(), Digest: cur.Digest}
	g := testpki.Grant(t, "org", org, []string{"Policy"}, nil)
	if revoked {
		g.Revoked, g.RevocationReason = true, "compromised"
	}
	return env.Sign(artifact.New(artifact.KindTrustPolicy, "default", &mcpreadyv1.TrustPolicy{Provenance: &mcpreadyv1.Provenance{Issuer: "test", Version: version}, Keys: []*mcpreadyv1.KeyGrant{g}, Supersedes: sup}))
}

// nackLog collects the client's log lines.
type nackLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *nackLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *nackLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// has reports whether one NACK line names every word.
func (l *nackLog) has(words ...string) bool {
	for line := range strings.SplitSeq(l.String(), "\n") {
		ok := strings.Contains(line, "NACK")
		for _, w := range words {
			ok = ok && strings.Contains(line, w)
		}
		if ok {
			return true
		}
	}
	return false
}

// TestRevocationUndoEndToEnd is the attack against control plane and
// agent: revoke a key, fetch the TrustPolicy's earlier revision with
// History and apply it again. Admin refuses it (FailedPrecondition,
// rollback); a compromised control plane that serves it anyway is NACKed
// by the agent, before and after a restart; the revoked key signs nothing.
func TestRevocationUndoEndToEnd(t *testing.T) {
	env := cptest.Start(t)
	ctx := context.Background()
	adm := mcpreadyv1.NewAdminServiceClient(env.Dial())
	cur, err := env.Store.Get(ctx, artifact.KindTrustPolicy, "default")
	if err != nil {
		t.Fatal(err)
	}
	v1, v2 := artifact.NextVersion(cur.HighWater), artifact.NextVersion(artifact.NextVersion(cur.HighWater))
	org, _ := sign.GenerateKey(sign.AlgorithmEd25519)
	applyOK := func(b []byte) {
		t.Helper()
		if _, err := adm.Apply(ctx, &mcpreadyv1.ApplyRequest{Bundle: b}); err != nil {
			t.Fatal(err)
		}
	}
	applyOK(trustGranting(t, env, org, v1, false))
	signedByOrg := func(owner, version string) []byte {
		b, _, err := sign.Sign(sample(artifact.KindPolicy, "default", version, owner, time.Time{}), org)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	applyOK(signedByOrg("team-a", "1"))

	lkg := filepath.Join(t.TempDir(), "lkg.json")
	nacks := &nackLog{}
	opts := Options{Conn: env.Dial(), Root: env.RootPub, Node: &mcpreadyv1.Node{Id: "host-1"}, LKGPath: lkg, MinBackoff: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(nacks, nil))}
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = c.Run(runCtx); close(done) }()
	trustAt := func(v string) func(*Snapshot) bool {
		return func(s *Snapshot) bool { return s.Trust != nil && s.Trust.Policy().Object.Version() == v }
	}
	waitFor(t, c, "the org-signed policy", func(s *Snapshot) bool { return s.Get(artifact.KindPolicy, "default") != nil && trustAt(v1)(s) })

	applyOK(trustGranting(t, env, org, v2, true)) // revoke
	waitFor(t, c, "the revocation", func(s *Snapshot) bool { return trustAt(v2)(s) && s.Get(artifact.KindPolicy, "default") == nil })

	// The control plane: revision 1 from History, applied again.
	h, err := adm.History(ctx, &mcpreadyv1.HistoryRequest{Kind: string(artifact.KindTrustPolicy), Name: "default"})
	if err != nil {
		t.Fatal(err)
	}
	var rev1 []byte
	for _, r := range h.GetRevisions() {
		if o, err := sign.Peek(r.GetBundle()); err == nil && o.Version() == v1 {
			rev1 = r.GetBundle()
		}
	}
	if rev1 == nil {
		t.Fatal("revision with the granting TrustPolicy not in history")
	}
	_, err = adm.Apply(ctx, &mcpreadyv1.ApplyRequest{Bundle: rev1})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "rollback") {
		t.Fatalf("re-applying revision 1 through Admin: %v, want FailedPrecondition rollback", err)
	}
	if _, err := adm.Apply(ctx, &mcpreadyv1.ApplyRequest{Bundle: signedByOrg("attacker", "2")}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("the revoked key signs on the control plane: %v", err)
	}

	// A compromised control plane serves revision 1 anyway.
	env.PutBundle(artifact.KindTrustPolicy, "default", rev1)
	env.PutBundle(artifact.KindPolicy, "default", signedByOrg("attacker", "3"))
	deadline := time.Now().Add(10 * time.Second)
	for !nacks.has("rollback", "TrustPolicy") || !nacks.has("key-revoked", "Policy") {
		if time.Now().After(deadline) {
			t.Fatalf("no rollback NACK for the TrustPolicy and the revoked key's Policy; log:\n%s", nacks.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if s := c.Snapshot(); !trustAt(v2)(s) || s.Get(artifact.KindPolicy, "default") != nil {
		t.Fatalf("agent rolled back: trust version %q, policy held %v", s.Trust.Policy().Object.Version(), s.Get(artifact.KindPolicy, "default") != nil)
	}
	cancel()
	<-done

	// Restart: the LKG holds version v2 and the replay is still refused.
	c2, _ := New(opts)
	if _, err := c2.Load(); err != nil || !trustAt(v2)(c2.Snapshot()) {
		t.Fatalf("restart: %v", err)
	}
	if err := offer(c2, artifact.KindTrustPolicy, "default", rev1); !errors.Is(err, artifact.ErrRollback) {
		t.Fatalf("replay after restart: %v", err)
	}
	if err := offer(c2, artifact.KindPolicy, "default", signedByOrg("attacker", "4")); err == nil {
		t.Fatal("the revoked key signs on the agent")
	}
}

// TestExpiredLeftOutOthersApply: an expired resource, or one with a
// version that is not a version (passive evidence stored before versions
// were checked), is refused with its reason and the others are installed.
func TestExpiredLeftOutOthersApply(t *testing.T) {
	env := cptest.Start(t)
	c := trustedClient(t, env, Options{})
	k := artifact.KindEvidence
	err := c.Apply(k, []*mcpreadyv1.Resource{
		{Name: "e/old", Bundle: env.Sign(sample(k, "e/old", "1", "", time.Now().Add(-time.Hour)))},
		{Name: "e/new", Bundle: env.Sign(sample(k, "e/new", "1", "", time.Now().Add(time.Hour)))},
		{Name: "e/legacy", Bundle: env.Sign(sample(k, "e/legacy", "window-1796132700", "", time.Time{}))},
	}, nil, false)
	if !errors.Is(err, artifact.ErrExpired) || !errors.Is(err, artifact.ErrBadVersion) || c.Snapshot().Get(k, "e/legacy") != nil {
		t.Fatalf("err = %v, want expired", err)
	}
	if s := c.Snapshot(); s.Get(k, "e/old") != nil || s.Get(k, "e/new") == nil {
		t.Fatalf("installed: old %v, new %v", s.Get(k, "e/old") != nil, s.Get(k, "e/new") != nil)
	}
}

// TestUnreadableMarksFailLoad: an agent whose high-water marks file is
// corrupt does not start from its last known good configuration.
func TestUnreadableMarksFailLoad(t *testing.T) {
	env := cptest.Start(t)
	lkg := filepath.Join(t.TempDir(), "lkg.json")
	opts := Options{Root: env.RootPub, Node: &mcpreadyv1.Node{Id: "n"}, LKGPath: lkg}
	c, _ := New(opts)
	if err := offer(c, artifact.KindTrustPolicy, "default", env.Sign(sample(artifact.KindTrustPolicy, "default", "1", "", time.Time{}))); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lkg+".versions", []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	c2, _ := New(opts)
	if _, err := c2.Load(); err == nil || !c2.Snapshot().Empty() {
		t.Fatalf("corrupt marks: %v, empty %v", err, c2.Snapshot().Empty())
	}
}
