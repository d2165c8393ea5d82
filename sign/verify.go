package sign

import (
	"bytes"
	"crypto"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/mcpready/mcpready/internal/canonjson"
	sgbundle "github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"

	"github.com/mcpready/mcpready/artifact"
)

// maxBundleSize bounds the bundles this package parses.
const maxBundleSize = 64 << 20

// Verified is a bundle that passed verification.
type Verified struct {
	// Object is decoded from the verified payload.
	Object *artifact.Object
	// KeyID is the id of the key that signed the bundle.
	KeyID string
	// Payload is the exact signed statement bytes.
	Payload []byte
	// Digest is "sha256:<hex>" of the predicate's canonical JSON (the
	// statement's subject digest).
	Digest string
}

// envelope is a parsed bundle, before any signature check.
type envelope struct {
	b       *sgbundle.Bundle
	keyID   string
	payload []byte
	ptype   string
}

// parseBundle decodes a Sigstore bundle and checks its shape: v0.3 media
// type, a public-key hint, a DSSE envelope with exactly one signature.
func parseBundle(data []byte) (*envelope, error) {
	if len(data) == 0 {
		return nil, verifyErr(ReasonMalformed, "", "empty bundle")
	}
	if len(data) > maxBundleSize {
		return nil, verifyErr(ReasonMalformed, "", "bundle larger than %d bytes", maxBundleSize)
	}
	var b sgbundle.Bundle
	if err := b.UnmarshalJSON(data); err != nil {
		return nil, verifyErr(ReasonMalformed, "", "not a Sigstore bundle: %v", err)
	}
	if b.GetMediaType() != BundleMediaType {
		return nil, verifyErr(ReasonMalformed, "", "bundle media type %q (want %q)", b.GetMediaType(), BundleMediaType)
	}
	pk := b.GetVerificationMaterial().GetPublicKey()
	if pk == nil {
		return nil, verifyErr(ReasonMalformed, "", "bundle verification material is not a public key")
	}
	keyID := pk.GetHint()
	env := b.GetDsseEnvelope()
	if env == nil {
		return nil, verifyErr(ReasonMalformed, keyID, "bundle content is not a DSSE envelope")
	}
	switch n := len(env.GetSignatures()); {
	case n == 0:
		return nil, verifyErr(ReasonUnsigned, keyID, "DSSE envelope has no signature")
	case n > 1:
		return nil, verifyErr(ReasonMalformed, keyID, "DSSE envelope has %d signatures (want 1)", n)
	case len(env.GetSignatures()[0].GetSig()) == 0:
		return nil, verifyErr(ReasonUnsigned, keyID, "DSSE signature is empty")
	}
	if keyID == "" {
		return nil, verifyErr(ReasonUnknownKey, "", "bundle has no key id (publicKey.hint)")
	}
	return &envelope{b: &b, keyID: keyID, payload: env.GetPayload(), ptype: env.GetPayloadType()}, nil
}

// keyVerifier is a public key ready to verify signatures.
type keyVerifier struct {
	id  string
	pub crypto.PublicKey
	tm  root.TrustedMaterial
}

func newKeyVerifier(pub crypto.PublicKey) (*keyVerifier, error) {
	id, err := KeyID(pub)
	if err != nil {
		return nil, err
	}
	v, err := loadVerifier(pub)
	if err != nil {
		return nil, err
	}
	key := root.NewExpiringKey(v, time.Time{}, time.Time{})
	tm := root.NewTrustedPublicKeyMaterial(func(hint string) (root.TimeConstrainedVerifier, error) {
		if hint != id {
			return nil, fmt.Errorf("key id %q is not %q", hint, id)
		}
		return key, nil
	})
	return &keyVerifier{id: id, pub: pub, tm: tm}, nil
}

// verify checks e's signature with k, then the statement and predicate.
func (k *keyVerifier) verify(e *envelope) (*Verified, error) {
	if e.keyID != k.id {
		return nil, verifyErr(ReasonUnknownKey, e.keyID, "bundle key id is not the verifying key %s", k.id)
	}
	sc, err := e.b.SignatureContent()
	if err != nil {
		return nil, verifyErr(ReasonMalformed, e.keyID, "%v", err)
	}
	vc, err := e.b.VerificationContent()
	if err != nil {
		return nil, verifyErr(ReasonMalformed, e.keyID, "%v", err)
	}
	if err := verify.VerifySignature(sc, vc, k.tm); err != nil {
		return nil, verifyErr(ReasonBadSignature, e.keyID, "%v", err)
	}
	return checkStatement(e)
}

// checkStatement checks a signature-verified envelope's content.
func checkStatement(e *envelope) (*Verified, error) {
	id := e.keyID
	if e.ptype != PayloadType {
		return nil, verifyErr(ReasonPayloadType, id, "DSSE payloadType %q (want %q)", e.ptype, PayloadType)
	}
	dec := json.NewDecoder(bytes.NewReader(e.payload))
	dec.DisallowUnknownFields()
	var st statement
	if err := dec.Decode(&st); err != nil {
		return nil, verifyErr(ReasonMalformed, id, "in-toto statement: %v", err)
	}
	if dec.More() {
		return nil, verifyErr(ReasonMalformed, id, "in-toto statement: trailing data")
	}
	if st.Type != StatementType {
		return nil, verifyErr(ReasonPayloadType, id, "statement _type %q (want %q)", st.Type, StatementType)
	}
	kind, err := artifact.KindFromPredicateType(st.PredicateType)
	if err != nil {
		return nil, verifyErr(ReasonPayloadType, id, "%v", err)
	}
	if len(st.Subject) != 1 {
		return nil, verifyErr(ReasonDigestMismatch, id, "statement has %d subjects (want 1)", len(st.Subject))
	}
	sub := st.Subject[0]
	want, ok := sub.Digest["sha256"]
	if !ok || len(sub.Digest) != 1 {
		return nil, verifyErr(ReasonDigestMismatch, id, "statement subject must carry exactly a sha256 digest")
	}
	pred := []byte(st.Predicate)
	sum := sha256.Sum256(pred)
	if got := hex.EncodeToString(sum[:]); got != want {
		return nil, verifyErr(ReasonDigestMismatch, id, "subject digest sha256:%s, predicate hashes to sha256:%s", want, got)
	}
	obj, err := artifact.Parse(pred)
	if err != nil {
		return nil, verifyErr(ReasonMalformed, id, "predicate: %v", err)
	}
	if obj.Kind != kind {
		return nil, verifyErr(ReasonPayloadType, id, "predicateType %q but predicate is a %s", st.PredicateType, obj.Kind)
	}
	if sub.Name != obj.Metadata.Name {
		return nil, verifyErr(ReasonDigestMismatch, id, "subject name %q is not metadata.name %q", sub.Name, obj.Metadata.Name)
	}
	objCanon, err := obj.CanonicalJSON()
	if err != nil {
		return nil, verifyErr(ReasonMalformed, id, "predicate: %v", err)
	}
	// The predicate must be exactly the object's canonical JSON (RFC 8785),
	// so that the subject digest is the digest of the object.
	if !bytes.Equal(objCanon, pred) {
		return nil, verifyErr(ReasonDigestMismatch, id, "predicate is not the canonical JSON of its %s", obj.Kind)
	}
	stCanon, err := canonjson.Transform(e.payload)
	if err != nil || !bytes.Equal(stCanon, e.payload) {
		return nil, verifyErr(ReasonMalformed, id, "in-toto statement is not canonical JSON (RFC 8785)")
	}
	return &Verified{Object: obj, KeyID: id, Payload: e.payload, Digest: "sha256:" + want}, nil
}

// VerifyWithKey verifies bundle with the public key pub alone, without a
// trust policy: the bundle's key id must be pub's, the signature must
// verify over the exact payload, and the payload must be a well-formed
// mcpready statement. Failures are *VerifyError.
func VerifyWithKey(bundle []byte, pub crypto.PublicKey) (*Verified, error) {
	k, err := newKeyVerifier(pub)
	if err != nil {
		return nil, err
	}
	e, err := parseBundle(bundle)
	if err != nil {
		return nil, err
	}
	return k.verify(e)
}
