package sign

import (
	"bytes"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpready/mcpready/artifact"
)

// editBundle decodes bundle, applies edit to its JSON tree and re-encodes.
func editBundle(t *testing.T, bundle []byte, edit func(b map[string]any)) []byte {
	t.Helper()
	var b map[string]any
	if err := json.Unmarshal(bundle, &b); err != nil {
		t.Fatal(err)
	}
	edit(b)
	out, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func dsseOf(b map[string]any) map[string]any { return b["dsseEnvelope"].(map[string]any) }
func sig0(b map[string]any) map[string]any {
	return dsseOf(b)["signatures"].([]any)[0].(map[string]any)
}

// flipB64 flips one bit of the byte at index i of a base64 field.
func flipB64(t *testing.T, s string, i int) string {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	raw[i%len(raw)] ^= 0x01
	return base64.StdEncoding.EncodeToString(raw)
}

// signStatement signs an arbitrary statement (as JSON tree) with key.
func signStatement(t *testing.T, key crypto.Signer, payloadType string, payload []byte) []byte {
	t.Helper()
	id, err := KeyID(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	b, err := signPayload(key, id, payloadType, payload)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// editStatement returns the canonical statement for obj after edit.
func editStatement(t *testing.T, obj *artifact.Object, edit func(st map[string]any)) []byte {
	t.Helper()
	stmt, err := buildStatement(obj)
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(stmt, &st); err != nil {
		t.Fatal(err)
	}
	edit(st)
	raw, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	out, err := artifact.Canonicalize(raw)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTamper flips each byte class of a valid bundle and checks that each
// flip is rejected with its reason.
func TestTamper(t *testing.T) {
	for _, alg := range []Algorithm{AlgorithmECDSAP256, AlgorithmEd25519} {
		key := testKey(t, alg)
		obj := fixture(t, artifact.KindDeclaration)
		good := mustSign(t, obj, key)
		payload, err := buildStatement(obj)
		if err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name   string
			bundle func(t *testing.T) []byte
			want   Reason
		}{
			{"payload first byte", func(t *testing.T) []byte {
				return editBundle(t, good, func(b map[string]any) {
					dsseOf(b)["payload"] = flipB64(t, dsseOf(b)["payload"].(string), 0)
				})
			}, ReasonBadSignature},
			{"payload middle byte", func(t *testing.T) []byte {
				return editBundle(t, good, func(b map[string]any) {
					dsseOf(b)["payload"] = flipB64(t, dsseOf(b)["payload"].(string), len(payload)/2)
				})
			}, ReasonBadSignature},
			{"payload last byte", func(t *testing.T) []byte {
				return editBundle(t, good, func(b map[string]any) {
					dsseOf(b)["payload"] = flipB64(t, dsseOf(b)["payload"].(string), len(payload)-1)
				})
			}, ReasonBadSignature},
			{"payload re-serialised", func(t *testing.T) []byte {
				var buf bytes.Buffer
				if err := json.Indent(&buf, payload, "", "  "); err != nil {
					t.Fatal(err)
				}
				return editBundle(t, good, func(b map[string]any) {
					dsseOf(b)["payload"] = base64.StdEncoding.EncodeToString(buf.Bytes())
				})
			}, ReasonBadSignature},
			{"payload truncated", func(t *testing.T) []byte {
				return editBundle(t, good, func(b map[string]any) {
					dsseOf(b)["payload"] = base64.StdEncoding.EncodeToString(payload[:len(payload)-1])
				})
			}, ReasonBadSignature},
			{"signature first byte", func(t *testing.T) []byte {
				return editBundle(t, good, func(b map[string]any) { sig0(b)["sig"] = flipB64(t, sig0(b)["sig"].(string), 0) })
			}, ReasonBadSignature},
			{"signature last byte", func(t *testing.T) []byte {
				return editBundle(t, good, func(b map[string]any) { sig0(b)["sig"] = flipB64(t, sig0(b)["sig"].(string), -1+64) })
			}, ReasonBadSignature},
			{"key id (hint)", func(t *testing.T) []byte {
				return editBundle(t, good, func(b map[string]any) {
					pk := b["verificationMaterial"].(map[string]any)["publicKey"].(map[string]any)
					pk["hint"] = flipB64(t, pk["hint"].(string), 3)
				})
			}, ReasonUnknownKey},
			{"key id removed", func(t *testing.T) []byte {
				return editBundle(t, good, func(b map[string]any) {
					b["verificationMaterial"].(map[string]any)["publicKey"] = map[string]any{}
				})
			}, ReasonUnknownKey},
			{"payloadType", func(t *testing.T) []byte {
				return editBundle(t, good, func(b map[string]any) { dsseOf(b)["payloadType"] = "application/vnd.in-toto+jsoN" })
			}, ReasonBadSignature},
			{"payloadType emptied", func(t *testing.T) []byte {
				return editBundle(t, good, func(b map[string]any) { dsseOf(b)["payloadType"] = "" })
			}, ReasonBadSignature},
			{"no signatures", func(t *testing.T) []byte {
				return editBundle(t, good, func(b map[string]any) { dsseOf(b)["signatures"] = []any{} })
			}, ReasonUnsigned},
			{"empty signature", func(t *testing.T) []byte {
				return editBundle(t, good, func(b map[string]any) { sig0(b)["sig"] = "" })
			}, ReasonUnsigned},
			{"two signatures", func(t *testing.T) []byte {
				return editBundle(t, good, func(b map[string]any) {
					dsseOf(b)["signatures"] = append(dsseOf(b)["signatures"].([]any), sig0(b))
				})
			}, ReasonMalformed},
			{"media type v0.2", func(t *testing.T) []byte {
				return editBundle(t, good, func(b map[string]any) {
					b["mediaType"] = "application/vnd.dev.sigstore.bundle+json;version=0.2"
				})
			}, ReasonMalformed},
			{"unknown bundle field", func(t *testing.T) []byte {
				return editBundle(t, good, func(b map[string]any) { b["extra"] = true })
			}, ReasonMalformed},
			{"certificate instead of key", func(t *testing.T) []byte {
				return editBundle(t, good, func(b map[string]any) {
					b["verificationMaterial"] = map[string]any{"certificate": map[string]any{"rawBytes": "AAAA"}}
				})
			}, ReasonMalformed},
			{"message signature instead of DSSE", func(t *testing.T) []byte {
				return editBundle(t, good, func(b map[string]any) {
					delete(b, "dsseEnvelope")
					b["messageSignature"] = map[string]any{"signature": "AAAA", "messageDigest": map[string]any{"algorithm": "SHA2_256", "digest": "AAAA"}}
				})
			}, ReasonMalformed},
			{"truncated bundle", func(t *testing.T) []byte { return good[:len(good)/2] }, ReasonMalformed},
			{"empty bundle", func(t *testing.T) []byte { return nil }, ReasonMalformed},
			{"not JSON", func(t *testing.T) []byte { return []byte("apiVersion: mcpready.dev/v1\n") }, ReasonMalformed},
			{"signed other payload type", func(t *testing.T) []byte {
				return signStatement(t, key, "text/plain", payload)
			}, ReasonPayloadType},
			{"signed unknown predicateType", func(t *testing.T) []byte {
				return signStatement(t, key, PayloadType, editStatement(t, obj, func(st map[string]any) {
					st["predicateType"] = "https://slsa.dev/provenance/v1"
				}))
			}, ReasonPayloadType},
			{"signed predicateType of another kind", func(t *testing.T) []byte {
				return signStatement(t, key, PayloadType, editStatement(t, obj, func(st map[string]any) {
					st["predicateType"] = artifact.KindPolicy.PredicateType()
				}))
			}, ReasonPayloadType},
			{"signed statement v0.1", func(t *testing.T) []byte {
				return signStatement(t, key, PayloadType, editStatement(t, obj, func(st map[string]any) {
					st["_type"] = "https://in-toto.io/Statement/v0.1"
				}))
			}, ReasonPayloadType},
			{"signed wrong subject digest", func(t *testing.T) []byte {
				return signStatement(t, key, PayloadType, editStatement(t, obj, func(st map[string]any) {
					st["subject"].([]any)[0].(map[string]any)["digest"] = map[string]any{"sha256": strings.Repeat("ab", 32)}
				}))
			}, ReasonDigestMismatch},
			{"signed wrong subject name", func(t *testing.T) []byte {
				return signStatement(t, key, PayloadType, editStatement(t, obj, func(st map[string]any) {
					st["subject"].([]any)[0].(map[string]any)["name"] = "com.example/other"
				}))
			}, ReasonDigestMismatch},
			{"signed edited predicate", func(t *testing.T) []byte {
				return signStatement(t, key, PayloadType, editStatement(t, obj, func(st map[string]any) {
					st["predicate"].(map[string]any)["metadata"].(map[string]any)["name"] = "com.example/other"
				}))
			}, ReasonDigestMismatch},
			{"signed two subjects", func(t *testing.T) []byte {
				return signStatement(t, key, PayloadType, editStatement(t, obj, func(st map[string]any) {
					s := st["subject"].([]any)
					st["subject"] = append(s, s[0])
				}))
			}, ReasonDigestMismatch},
			{"signed non-JSON payload", func(t *testing.T) []byte {
				return signStatement(t, key, PayloadType, []byte("not json"))
			}, ReasonMalformed},
			{"signed statement with unknown field", func(t *testing.T) []byte {
				return signStatement(t, key, PayloadType, editStatement(t, obj, func(st map[string]any) { st["extra"] = 1 }))
			}, ReasonMalformed},
			{"signed non-canonical statement", func(t *testing.T) []byte {
				spaced := append([]byte("{ "), payload[1:]...)
				return signStatement(t, key, PayloadType, spaced)
			}, ReasonMalformed},
		}
		for _, tt := range tests {
			t.Run(string(alg)+"/"+tt.name, func(t *testing.T) {
				v, err := VerifyWithKey(tt.bundle(t), key.Public())
				if err == nil {
					t.Fatalf("verified %s; want %s", v.Digest, tt.want)
				}
				if got := ReasonOf(err); got != tt.want {
					t.Fatalf("reason %q, want %q (%v)", got, tt.want, err)
				}
			})
		}
	}
}

func TestVerifyWithOtherKey(t *testing.T) {
	good := mustSign(t, fixture(t, artifact.KindPolicy), testKey(t, AlgorithmECDSAP256))
	_, err := VerifyWithKey(good, testKey(t, AlgorithmEd25519).Public())
	if ReasonOf(err) != ReasonUnknownKey {
		t.Fatalf("got %v, want %s", err, ReasonUnknownKey)
	}
	// A bundle claiming the verifying key's id but signed by another key.
	other := newKey(t, AlgorithmECDSAP256)
	stmt, _ := buildStatement(fixture(t, artifact.KindPolicy))
	id, _ := KeyID(testKey(t, AlgorithmECDSAP256).Public())
	forged, err := signPayload(other, id, PayloadType, stmt)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyWithKey(forged, testKey(t, AlgorithmECDSAP256).Public()); ReasonOf(err) != ReasonBadSignature {
		t.Fatalf("forged: got %v, want %s", err, ReasonBadSignature)
	}
}

// TestReencodedBundleStillVerifies checks that re-encoding the bundle JSON
// (whitespace, key order) does not matter: only the signed bytes do.
func TestReencodedBundleStillVerifies(t *testing.T) {
	key := testKey(t, AlgorithmEd25519)
	good := mustSign(t, fixture(t, artifact.KindEvidence), key)
	var buf bytes.Buffer
	if err := json.Indent(&buf, good, "", "  "); err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyWithKey(buf.Bytes(), key.Public()); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyErrorMessage(t *testing.T) {
	err := error(&VerifyError{Reason: ReasonKeyRevoked, KeyID: "abc", Detail: "key \"p\" is revoked"})
	if got, want := err.Error(), `verification failed: key-revoked: key "p" is revoked (key abc)`; got != want {
		t.Errorf("got %q want %q", got, want)
	}
	if ReasonOf(nil) != "" || ReasonOf(ErrKeyType) != "" {
		t.Error("ReasonOf of a non-verification error must be empty")
	}
}
