package subscribe

import (
	"errors"
	"testing"
	"time"

	"github.com/mcpready/mcpready/agent/internal/cptest"
	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// TestFullSetExpiredKeepsPolicy is the attack of a state-of-the-world
// control plane that offers, in place of the Policy or Declaration an
// agent holds, an expired signed bundle of it (any old version that aged
// out): before, the held one was dropped as if a signed tombstone had
// removed it (a Declaration still is without the tombstone rule). Now it
// is kept (NACK: expired, unsigned-removal); its exact tombstone still
// removes it.
func TestFullSetExpiredKeepsPolicy(t *testing.T) {
	for _, k := range []artifact.Kind{artifact.KindPolicy, artifact.KindDeclaration} {
		t.Run(string(k), func(t *testing.T) {
			env := cptest.Start(t)
			c := trustedClient(t, env, Options{})
			v2 := env.Sign(sample(k, "org/p", "2", "", time.Time{}))
			if err := offer(c, k, "org/p", v2); err != nil {
				t.Fatal(err)
			}
			for _, v := range []string{"1", "9"} {
				expired := []*mcpreadyv1.Resource{{Name: "org/p", Bundle: env.Sign(sample(k, "org/p", v, "", time.Now().Add(-time.Minute)))}}
				err := c.Apply(k, expired, nil, true)
				if !errors.Is(err, artifact.ErrExpired) || !errors.Is(err, ErrUnsignedRemoval) || heldVersion(c, k, "org/p") != "2" {
					t.Fatalf("a full set with version %s expired: %v, held %s", v, err, heldVersion(c, k, "org/p"))
				}
			}
			expired := []*mcpreadyv1.Resource{{Name: "org/p", Bundle: env.Sign(sample(k, "org/p", "9", "", time.Now().Add(-time.Minute)))}}
			if err := c.Apply(k, expired, nil, true, tombRes(t, env, v2)); !errors.Is(err, artifact.ErrExpired) || heldVersion(c, k, "org/p") != "<none>" {
				t.Fatalf("with the exact tombstone: %v, held %s", err, heldVersion(c, k, "org/p"))
			}
		})
	}
}
