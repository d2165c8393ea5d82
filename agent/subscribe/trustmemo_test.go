package subscribe

import (
	"crypto"
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/agent/internal/cptest"
	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/testpki"
	"github.com/mcpready/mcpready/sign"
)

// TestTrustMemo: a TrustPolicy response offering what was already
// verified reuses the verified chain (the same *sign.Trust) instead of
// verifying it again; a different bundle at the same version, under the
// same name or another, a forgery, and the memoised one once expired are
// still refused, however often they are offered.
func TestTrustMemo(t *testing.T) {
	env := cptest.Start(t)
	now := time.Now()
	c, err := New(Options{Root: env.RootPub, Node: &mcpreadyv1.Node{Id: "n"}, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	k1, _ := sign.GenerateKey(sign.AlgorithmEd25519)
	k2, _ := sign.GenerateKey(sign.AlgorithmEd25519)
	v1 := expiringTrust(t, env.Root, "default", "1", nil, k1, now.Add(time.Hour))
	tp := artifact.KindTrustPolicy
	if err := c.Apply(tp, []*mcpreadyv1.Resource{trustRes("default", "1", v1)}, nil, true); err != nil {
		t.Fatal(err)
	}
	tr1 := c.Snapshot().Trust
	for range 2 {
		if err := c.Apply(tp, []*mcpreadyv1.Resource{trustRes("default", "1", v1)}, nil, false); err != nil || c.Snapshot().Trust != tr1 {
			t.Fatalf("re-offer of the held bundle: %v; the chain was verified again: %v", err, c.Snapshot().Trust != tr1)
		}
		if err := c.Apply(tp, nil, nil, false); err != nil || c.Snapshot().Trust != tr1 {
			t.Fatalf("empty delta: %v, same trust %v", err, c.Snapshot().Trust == tr1)
		}
	}
	fork := testpki.ChainTrust(t, env.Root, "default", "1", nil, map[string]crypto.Signer{"k2": k2})
	forgedObj := testpki.Versioned(tp, "default", &mcpreadyv1.TrustPolicy{Keys: []*mcpreadyv1.KeyGrant{testpki.Grant(t, "k2", k2, []string{"*"}, nil)}},
		&mcpreadyv1.Provenance{Issuer: "test", Version: "1"})
	forged := testpki.Sign(t, forgedObj, k2)
	for range 2 {
		for name, offer := range map[string][]*mcpreadyv1.Resource{
			"another bundle at the same version and name":  {trustRes("default", "2", fork)},
			"another bundle at the same version, new name": {trustRes("default", "1", v1), trustRes("org/fork", "1", fork)},
			"a forgery at the same version and name":       {trustRes("default", "3", forged)},
		} {
			if err := c.Apply(tp, offer, nil, false); err == nil || c.Snapshot().Trust != tr1 {
				t.Errorf("%s: accepted (%v)", name, err)
			}
		}
	}
	if err := c.Apply(tp, []*mcpreadyv1.Resource{trustRes("default", "1", fork)}, nil, true); !errors.Is(err, artifact.ErrRollback) || c.Snapshot().Trust != tr1 {
		t.Errorf("a full set of only the fork: %v", err)
	}
	// A successor is verified once, then remembered with what it replaced.
	v2 := expiringTrust(t, env.Root, "default", "2", v1, k1, now.Add(time.Hour))
	if err := c.Apply(tp, []*mcpreadyv1.Resource{trustRes("default", "4", v2)}, nil, false); err != nil || c.Snapshot().Trust == tr1 {
		t.Fatalf("successor: %v", err)
	}
	tr2 := c.Snapshot().Trust
	if err := c.Apply(tp, []*mcpreadyv1.Resource{trustRes("default", "4", v2)}, nil, true); err != nil || c.Snapshot().Trust != tr2 {
		t.Fatalf("re-offer of the successor: %v, same trust %v", err, c.Snapshot().Trust == tr2)
	}
	if err := c.Apply(tp, []*mcpreadyv1.Resource{trustRes("default", "1", v1)}, nil, true); !errors.Is(err, artifact.ErrRollback) || c.Snapshot().Trust != tr2 {
		t.Fatalf("the remembered predecessor offered again: %v", err)
	}
	v1, tr1 = v2, tr2
	now = now.Add(2 * time.Hour)
	if err := c.Apply(tp, []*mcpreadyv1.Resource{trustRes("default", "1", v1)}, nil, false); !errors.Is(err, artifact.ErrExpired) {
		t.Fatalf("the memoised TrustPolicy after it expired: %v", err)
	}
}

// expiringTrust is testpki.ChainTrust for one key (granted Policy) with
// provenance.expiresAt set.
func expiringTrust(t *testing.T, root crypto.Signer, name, version string, sup []byte, k crypto.Signer, expires time.Time) []byte {
	t.Helper()
	tp := &mcpreadyv1.TrustPolicy{Provenance: &mcpreadyv1.Provenance{Issuer: "test", Version: version, ExpiresAt: timestamppb.New(expires)},
		Keys: []*mcpreadyv1.KeyGrant{testpki.Grant(t, "k", k, []string{"Policy"}, nil)}}
	if sup != nil {
		tp.Supersedes = testpki.RefOf(t, sup)
	}
	return testpki.Sign(t, artifact.New(artifact.KindTrustPolicy, name, tp), root)
}
