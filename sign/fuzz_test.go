package sign

import (
	"bytes"
	"crypto/ed25519"
	"testing"

	"github.com/mcpready/mcpready/artifact"
)

// fuzzKey is a fixed Ed25519 key, so that fuzz inputs stay valid across runs.
var fuzzKey = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))

// checkVerified asserts the invariants of a successful verification.
func checkVerified(t *testing.T, v *Verified) {
	t.Helper()
	canon, err := v.Object.CanonicalJSON()
	if err != nil {
		t.Fatalf("verified object does not canonicalise: %v", err)
	}
	if artifact.Digest(canon) != v.Digest {
		t.Fatalf("verified digest %s, object hashes to %s", v.Digest, artifact.Digest(canon))
	}
	if !bytes.Contains(v.Payload, canon) {
		t.Fatal("verified payload does not contain the object's canonical JSON")
	}
}

// FuzzVerifyBundle feeds arbitrary bundles to VerifyWithKey and Trust.Verify:
// they must never panic, every failure must carry a Reason, and anything
// that verifies must be self-consistent.
func FuzzVerifyBundle(f *testing.F) {
	for _, k := range artifact.Kinds() {
		f.Add(mustSign(f, fixture(f, k), fuzzKey))
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json"}`))
	f.Add([]byte(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","verificationMaterial":{"publicKey":{"hint":"x"}},"dsseEnvelope":{"payload":"e30=","payloadType":"application/vnd.in-toto+json","signatures":[]}}`))
	pub := fuzzKey.Public()
	trust, err := NewTrust(mustSign(f, trustPolicy(), fuzzKey), pub, now)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, bundle []byte) {
		v, err := VerifyWithKey(bundle, pub)
		if err != nil {
			if ReasonOf(err) == "" {
				t.Fatalf("untyped verification error: %v", err)
			}
		} else {
			checkVerified(t, v)
		}
		v2, err2 := trust.Verify(bundle, now)
		if (err == nil) != (err2 == nil) {
			t.Fatalf("root key via trust disagrees with key: %v vs %v", err, err2)
		}
		if err2 == nil {
			checkVerified(t, v2)
		}
	})
}

// FuzzVerifyPayload signs arbitrary statements, so that the checks after
// the signature (payload type, statement, subject, predicate) are reached.
func FuzzVerifyPayload(f *testing.F) {
	for _, k := range artifact.Kinds() {
		stmt, err := buildStatement(fixture(f, k))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(PayloadType, stmt)
	}
	f.Add("text/plain", []byte("{}"))
	f.Add(PayloadType, []byte(`{"_type":"https://in-toto.io/Statement/v1","predicate":{},"predicateType":"https://mcpready.dev/policy/v1","subject":[]}`))
	id, err := KeyID(fuzzKey.Public())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, payloadType string, payload []byte) {
		bundle, err := signPayload(fuzzKey, id, payloadType, payload)
		if err != nil {
			return // e.g. payloadType that is not valid UTF-8
		}
		v, err := VerifyWithKey(bundle, fuzzKey.Public())
		if err != nil {
			if ReasonOf(err) == "" {
				t.Fatalf("untyped verification error: %v", err)
			}
			return
		}
		checkVerified(t, v)
		if !bytes.Equal(v.Payload, payload) {
			t.Fatal("verified payload is not the signed payload")
		}
		want, err := buildStatement(v.Object)
		if err != nil || !bytes.Equal(want, payload) {
			t.Fatalf("accepted a statement Sign would not produce:\n%s\n%s", payload, want)
		}
	})
}
