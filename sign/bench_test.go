package sign

import (
	"testing"

	"github.com/mcpready/mcpready/artifact"
)

func BenchmarkSign(b *testing.B) {
	for _, alg := range []Algorithm{AlgorithmECDSAP256, AlgorithmEd25519} {
		b.Run(string(alg), func(b *testing.B) {
			key, obj := testKey(b, alg), fixture(b, artifact.KindDeclaration)
			for b.Loop() {
				if _, _, err := Sign(obj, key); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkTrustVerify(b *testing.B) {
	rootKey := testKey(b, AlgorithmECDSAP256)
	for _, alg := range []Algorithm{AlgorithmECDSAP256, AlgorithmEd25519} {
		b.Run(string(alg), func(b *testing.B) {
			key := newKey(b, alg)
			trust, err := NewTrust(mustSign(b, trustPolicy(grantFor(b, "p", key, []string{"*"}, nil)), rootKey), rootKey.Public(), now)
			if err != nil {
				b.Fatal(err)
			}
			bundle := mustSign(b, fixture(b, artifact.KindDeclaration), key)
			for b.Loop() {
				if _, err := trust.Verify(bundle, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPickTrust is the agent's and the writer's cost to choose the
// active TrustPolicy from one offered bundle: one root verification.
func BenchmarkPickTrust(b *testing.B) {
	rootKey := testKey(b, AlgorithmECDSAP256)
	bundles := [][]byte{mustSign(b, trustPolicy(grantFor(b, "p", newKey(b, AlgorithmEd25519), []string{"*"}, nil)), rootKey)}
	for b.Loop() {
		if _, _, err := PickTrust(bundles, rootKey.Public(), now); err != nil {
			b.Fatal(err)
		}
	}
}
