package sign

import (
	"crypto"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// grantFor grants key kinds for scopes; a grant that may sign Evidence
// binds its claims (issuer "test/<name>", independence "consumer"), as
// NewTrust requires.
func grantFor(t testing.TB, name string, key crypto.Signer, kinds, scopes []string) *mcpreadyv1.KeyGrant {
	t.Helper()
	pemData, err := MarshalPublicKey(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	id, err := KeyID(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	g := &mcpreadyv1.KeyGrant{KeyId: id, PublicKey: string(pemData), Name: name, Kinds: kinds, Scopes: scopes}
	if slices.Contains(kinds, "*") || slices.Contains(kinds, string(artifact.KindEvidence)) {
		g.EvidenceIssuer, g.Independence = "test/"+name, "consumer"
	}
	return g
}

func trustPolicy(grants ...*mcpreadyv1.KeyGrant) *artifact.Object {
	return artifact.New(artifact.KindTrustPolicy, "example.org/trust", &mcpreadyv1.TrustPolicy{
		Provenance: &mcpreadyv1.Provenance{Issuer: "example.org"},
		Keys:       grants,
	})
}

func named(k artifact.Kind, name string) *artifact.Object {
	return artifact.New(k, name, k.NewSpec())
}

func tombstone(name, targetKind, targetName string) *artifact.Object {
	return artifact.New(artifact.KindTombstone, name, &mcpreadyv1.Tombstone{TargetKind: targetKind, TargetName: targetName})
}

func TestTrust(t *testing.T) {
	rootKey := testKey(t, AlgorithmECDSAP256)
	provider := newKey(t, AlgorithmEd25519)
	org := newKey(t, AlgorithmECDSAP256)
	expired := newKey(t, AlgorithmEd25519)
	future := newKey(t, AlgorithmEd25519)
	revoked := newKey(t, AlgorithmEd25519)
	revokedAt := newKey(t, AlgorithmEd25519)
	stranger := newKey(t, AlgorithmEd25519)

	gExpired := grantFor(t, "expired", expired, []string{"*"}, nil)
	gExpired.NotAfter = timestamppb.New(now.Add(-time.Hour))
	gFuture := grantFor(t, "future", future, []string{"*"}, nil)
	gFuture.NotBefore = timestamppb.New(now.Add(time.Hour))
	gRevoked := grantFor(t, "revoked", revoked, []string{"*"}, nil)
	gRevoked.Revoked = true
	gRevoked.RevocationReason = "leaked"
	gRevokedAt := grantFor(t, "revoked-at", revokedAt, []string{"*"}, nil)
	gRevokedAt.RevokedAt = timestamppb.New(now.Add(-time.Minute))

	tp := trustPolicy(
		grantFor(t, "provider-a", provider, []string{"Declaration", "Tombstone"}, []string{"com.example/*"}),
		grantFor(t, "org", org, []string{"policies", "RegistryEntry"}, nil),
		gExpired, gFuture, gRevoked, gRevokedAt,
	)
	trust, err := NewTrust(mustSign(t, tp, rootKey), rootKey.Public(), now)
	if err != nil {
		t.Fatal(err)
	}
	if trust.Policy().Object.Metadata.Name != "example.org/trust" {
		t.Errorf("Policy() = %v", trust.Policy().Object.Metadata)
	}

	tests := []struct {
		name   string
		bundle func() []byte
		want   Reason // "" means verified
	}{
		{"provider declaration in scope", func() []byte { return mustSign(t, named(artifact.KindDeclaration, "com.example/docs"), provider) }, ""},
		{"provider declaration nested scope", func() []byte {
			return mustSign(t, named(artifact.KindDeclaration, "com.example/docs/v2"), provider)
		}, ""},
		{"provider declaration out of scope", func() []byte {
			return mustSign(t, named(artifact.KindDeclaration, "com.other/docs"), provider)
		}, ReasonOutOfScope},
		{"provider declaration scope prefix itself", func() []byte {
			return mustSign(t, named(artifact.KindDeclaration, "com.example"), provider)
		}, ReasonOutOfScope},
		{"provider policy kind not allowed", func() []byte { return mustSign(t, named(artifact.KindPolicy, "com.example/p"), provider) }, ReasonKindNotAllowed},
		{"provider tombstone of own declaration", func() []byte {
			return mustSign(t, tombstone("x", "Declaration", "com.example/docs"), provider)
		}, ""},
		{"provider tombstone of other's declaration", func() []byte {
			return mustSign(t, tombstone("com.example/x", "Declaration", "com.other/docs"), provider)
		}, ReasonOutOfScope},
		{"provider tombstone of a policy", func() []byte {
			return mustSign(t, tombstone("com.example/x", "Policy", "com.example/docs"), provider)
		}, ReasonKindNotAllowed},
		{"org tombstone kind not allowed", func() []byte {
			return mustSign(t, tombstone("x", "Policy", "example.org/default"), org)
		}, ReasonKindNotAllowed},
		{"tombstone with unknown target kind", func() []byte {
			return mustSign(t, tombstone("com.example/x", "Widget", "com.example/docs"), provider)
		}, ReasonMalformed},
		{"org policy any name", func() []byte { return mustSign(t, named(artifact.KindPolicy, "anything/at/all"), org) }, ""},
		{"root signs anything", func() []byte { return mustSign(t, named(artifact.KindEvidence, "x/y"), rootKey) }, ""},
		{"unknown key", func() []byte { return mustSign(t, named(artifact.KindPolicy, "p"), stranger) }, ReasonUnknownKey},
		{"expired key", func() []byte { return mustSign(t, named(artifact.KindPolicy, "p"), expired) }, ReasonKeyExpired},
		{"not yet valid key", func() []byte { return mustSign(t, named(artifact.KindPolicy, "p"), future) }, ReasonKeyExpired},
		{"revoked key", func() []byte { return mustSign(t, named(artifact.KindPolicy, "p"), revoked) }, ReasonKeyRevoked},
		{"key revoked at a time", func() []byte { return mustSign(t, named(artifact.KindPolicy, "p"), revokedAt) }, ReasonKeyRevoked},
		{"digest mismatch", func() []byte {
			obj := named(artifact.KindDeclaration, "com.example/docs")
			id, _ := KeyID(provider.Public())
			stmt, _ := buildStatement(obj)
			b, err := signPayload(provider, id, PayloadType, replaceDigest(t, stmt))
			if err != nil {
				t.Fatal(err)
			}
			return b
		}, ReasonDigestMismatch},
		{"bad signature", func() []byte {
			obj := named(artifact.KindDeclaration, "com.example/docs")
			id, _ := KeyID(provider.Public())
			stmt, _ := buildStatement(obj)
			b, err := signPayload(stranger, id, PayloadType, stmt)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}, ReasonBadSignature},
		{"unsigned", func() []byte {
			b := mustSign(t, named(artifact.KindDeclaration, "com.example/docs"), provider)
			return editBundle(t, b, func(m map[string]any) { dsseOf(m)["signatures"] = []any{} })
		}, ReasonUnsigned},
		{"malformed", func() []byte { return []byte(`{"mediaType":`) }, ReasonMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := trust.Verify(tt.bundle(), now)
			if got := ReasonOf(err); got != tt.want {
				t.Fatalf("reason %q, want %q (err %v)", got, tt.want, err)
			}
			if tt.want == "" && (v == nil || v.Object == nil) {
				t.Fatal("no verified object")
			}
			if tt.want != "" && err != nil && err.Error() == "" {
				t.Fatal("empty error message")
			}
		})
	}
	// The window is checked at the given time.
	if _, err := trust.Verify(mustSign(t, named(artifact.KindPolicy, "p"), expired), now.Add(-2*time.Hour)); err != nil {
		t.Errorf("expired key before its expiry: %v", err)
	}
	if _, err := trust.Verify(mustSign(t, named(artifact.KindPolicy, "p"), revokedAt), now.Add(-time.Hour)); err != nil {
		t.Errorf("key before its revocation time: %v", err)
	}
}

// replaceDigest changes the statement's subject digest, keeping the
// statement canonical.
func replaceDigest(t testing.TB, stmt []byte) []byte {
	t.Helper()
	const key = `"sha256":"`
	i := strings.Index(string(stmt), key)
	if i < 0 {
		t.Fatal("no digest in statement")
	}
	out := append([]byte(nil), stmt...)
	copy(out[i+len(key):], "zz")
	return out
}

func TestNewTrustRejects(t *testing.T) {
	rootKey := testKey(t, AlgorithmECDSAP256)
	other := testKey(t, AlgorithmEd25519)
	good := grantFor(t, "p", other, []string{"*"}, nil)
	mismatch := grantFor(t, "p", other, []string{"*"}, nil)
	mismatch.KeyId = "AAAA"
	badKind := grantFor(t, "p", other, []string{"Widget"}, nil)
	badScope := grantFor(t, "p", other, nil, []string{"com.example/["})
	badPEM := grantFor(t, "p", other, nil, nil)
	badPEM.PublicKey = "not a key"
	// a grant of Evidence that binds no claim (or only one) would let
	// its key claim any issuer or independence
	unbound := grantFor(t, "p", other, []string{"Policy", "Evidence"}, nil)
	unbound.EvidenceIssuer, unbound.Independence = "", ""
	halfBound := grantFor(t, "p", other, []string{"*"}, nil)
	halfBound.Independence = ""
	revokedUnbound := grantFor(t, "p", other, []string{"*"}, nil)
	revokedUnbound.EvidenceIssuer, revokedUnbound.Independence, revokedUnbound.Revoked = "", "", true
	if _, err := NewTrust(mustSign(t, trustPolicy(revokedUnbound), rootKey), rootKey.Public(), now); err != nil {
		t.Errorf("a revoked grant without Evidence claims: %v", err)
	}
	expiredTP := trustPolicy(good)
	expiredTP.Spec.(*mcpreadyv1.TrustPolicy).Provenance.ExpiresAt = timestamppb.New(now.Add(-time.Second))

	tests := []struct {
		name   string
		bundle []byte
		root   crypto.PublicKey
		want   Reason
	}{
		{"signed by another key", mustSign(t, trustPolicy(good), other), rootKey.Public(), ReasonUnknownKey},
		{"not a trust policy", mustSign(t, named(artifact.KindPolicy, "p"), rootKey), rootKey.Public(), ReasonKindNotAllowed},
		{"key id mismatch", mustSign(t, trustPolicy(mismatch), rootKey), rootKey.Public(), ReasonMalformed},
		{"duplicate key", mustSign(t, trustPolicy(good, good), rootKey), rootKey.Public(), ReasonMalformed},
		{"unknown kind", mustSign(t, trustPolicy(badKind), rootKey), rootKey.Public(), ReasonMalformed},
		{"bad scope", mustSign(t, trustPolicy(badScope), rootKey), rootKey.Public(), ReasonMalformed},
		{"bad public key", mustSign(t, trustPolicy(badPEM), rootKey), rootKey.Public(), ReasonMalformed},
		{"expired policy", mustSign(t, expiredTP, rootKey), rootKey.Public(), ReasonKeyExpired},
		{"evidence grant binds no claim", mustSign(t, trustPolicy(unbound), rootKey), rootKey.Public(), ReasonGrantUnbound},
		{"evidence grant binds no independence", mustSign(t, trustPolicy(halfBound), rootKey), rootKey.Public(), ReasonGrantUnbound},
		{"truncated", mustSign(t, trustPolicy(good), rootKey)[:40], rootKey.Public(), ReasonMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewTrust(tt.bundle, tt.root, now)
			if got := ReasonOf(err); got != tt.want {
				t.Fatalf("reason %q, want %q (err %v)", got, tt.want, err)
			}
		})
	}
	if _, err := NewTrust(mustSign(t, trustPolicy(good), rootKey), nil, now); err == nil {
		t.Error("nil root key accepted")
	}
}

func TestScopeMatch(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"*", "a/b/c", true},
		{"com.example/*", "com.example/docs", true},
		{"com.example/*", "com.example/docs/v2", true},
		{"com.example/*", "com.example", false},
		{"com.example/*", "com.examplex/docs", false},
		{"com.*/*", "com.example/docs", true},
		{"com.example/docs", "com.example/docs", true},
		{"com.example/docs", "com.example/docs2", false},
		{"com.example/d?cs", "com.example/docs", true},
		{"com.example/*/search", "com.example/docs/search", true},
		{"com.example/*/search", "com.example/docs/list", false},
	}
	for _, tt := range tests {
		if got := scopeMatch(tt.pattern, tt.name); got != tt.want {
			t.Errorf("scopeMatch(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
}

// TestTrustConcurrent exercises Verify from many goroutines (run with -race).
func TestTrustConcurrent(t *testing.T) {
	rootKey := testKey(t, AlgorithmECDSAP256)
	provider := testKey(t, AlgorithmEd25519)
	trust, err := NewTrust(mustSign(t, trustPolicy(grantFor(t, "p", provider, []string{"*"}, nil)), rootKey), rootKey.Public(), now)
	if err != nil {
		t.Fatal(err)
	}
	b := mustSign(t, named(artifact.KindPolicy, "p"), provider)
	done := make(chan error)
	for range 8 {
		go func() {
			var err error
			for range 50 {
				if _, err = trust.Verify(b, now); err != nil {
					break
				}
			}
			done <- err
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
