package sign

import (
	"bytes"
	"crypto"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mcpready/mcpready/artifact"
)

var (
	keysOnce sync.Once
	keys     map[Algorithm]crypto.Signer
)

// testKey returns a per-process key of algorithm alg.
func testKey(t testing.TB, alg Algorithm) crypto.Signer {
	t.Helper()
	keysOnce.Do(func() {
		keys = map[Algorithm]crypto.Signer{}
		for _, a := range []Algorithm{AlgorithmECDSAP256, AlgorithmEd25519} {
			k, err := GenerateKey(a)
			if err != nil {
				panic(err)
			}
			keys[a] = k
		}
	})
	return keys[alg]
}

// newKey returns a fresh key.
func newKey(t testing.TB, alg Algorithm) crypto.Signer {
	t.Helper()
	k, err := GenerateKey(alg)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// fixture parses sign/testdata/<kind lower>.yaml.
func fixture(t testing.TB, k artifact.Kind) *artifact.Object {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", strings.ToLower(string(k))+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	obj, err := artifact.Parse(data)
	if err != nil {
		t.Fatalf("%s fixture: %v", k, err)
	}
	return obj
}

func mustSign(t testing.TB, obj *artifact.Object, key crypto.Signer) []byte {
	t.Helper()
	b, _, err := Sign(obj, key)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSignVerifyRoundTrip(t *testing.T) {
	for _, alg := range []Algorithm{AlgorithmECDSAP256, AlgorithmEd25519} {
		key := testKey(t, alg)
		for _, k := range artifact.Kinds() {
			t.Run(string(alg)+"/"+string(k), func(t *testing.T) {
				obj := fixture(t, k)
				bundle, payload, err := Sign(obj, key)
				if err != nil {
					t.Fatal(err)
				}
				v, err := VerifyWithKey(bundle, key.Public())
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(v.Payload, payload) {
					t.Error("verified payload differs from signed payload")
				}
				want, _ := obj.CanonicalJSON()
				got, _ := v.Object.CanonicalJSON()
				if !bytes.Equal(want, got) {
					t.Errorf("object changed in round trip:\n%s\n%s", want, got)
				}
				if v.Digest != artifact.Digest(want) {
					t.Errorf("digest %s, want %s", v.Digest, artifact.Digest(want))
				}
				id, _ := KeyID(key.Public())
				if v.KeyID != id {
					t.Errorf("key id %s, want %s", v.KeyID, id)
				}
				var b map[string]any
				if err := json.Unmarshal(bundle, &b); err != nil || b["mediaType"] != BundleMediaType {
					t.Errorf("bundle media type %v (%v)", b["mediaType"], err)
				}
			})
		}
	}
}
