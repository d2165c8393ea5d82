// Package sign signs and verifies mcpready artifacts offline.
//
// Every artifact is signed as a Sigstore bundle v0.3
// (application/vnd.dev.sigstore.bundle.v0.3+json) holding one DSSE
// envelope (payloadType application/vnd.in-toto+json) over an in-toto v1
// Statement: predicateType is the kind's artifact.Kind.PredicateType(),
// predicate is the artifact's RFC 8785 canonical JSON, and the single
// subject is {name: metadata.name, digest: {sha256: <hex of that JSON>}}.
// The statement itself is canonical JSON too. The bundle's
// verificationMaterial.publicKey.hint is the key id (KeyID). Stock cosign
// v3 verifies these bundles with
//
//	cosign verify-blob-attestation --key K.pub --bundle B --type <predicateType> --insecure-ignore-tlog <predicate file>
//
// Verification is offline: no transparency log, no timestamp authority.
// It checks the signature over the exact signed bytes (nothing is
// re-serialised first), then that the statement describes a well-formed
// artifact whose canonical JSON hashes to the subject digest. Trust adds
// the organisation's TrustPolicy: which keys may sign which kinds, for
// which names, when.
//
// Keys are ECDSA P-256 or Ed25519 in PEM; private keys are encrypted in
// cosign's format, so cosign key pairs work here and ours work in cosign.
//
// This package does not fetch, store or distribute anything, and never
// logs key material or passwords.
package sign

import (
	"bytes"
	"crypto"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/mcpready/mcpready/internal/canonjson"
	ssldsse "github.com/secure-systems-lab/go-securesystemslib/dsse"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	protodsse "github.com/sigstore/protobuf-specs/gen/pb-go/dsse"
	"github.com/sigstore/sigstore/pkg/signature"
	sigdsse "github.com/sigstore/sigstore/pkg/signature/dsse"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/mcpready/mcpready/artifact"
)

// Wire constants.
const (
	// BundleMediaType is the media type of the bundles Sign produces.
	BundleMediaType = "application/vnd.dev.sigstore.bundle.v0.3+json"
	// PayloadType is the DSSE payload type: an in-toto statement.
	PayloadType = "application/vnd.in-toto+json"
	// StatementType is the in-toto statement _type.
	StatementType = "https://in-toto.io/Statement/v1"
)

// statement is an in-toto v1 Statement with one mcpready artifact as
// predicate.
type statement struct {
	Type          string          `json:"_type"`
	Subject       []subject       `json:"subject"`
	PredicateType string          `json:"predicateType"`
	Predicate     json.RawMessage `json:"predicate"`
}

type subject struct {
	Name   string            `json:"name"`
	Digest map[string]string `json:"digest"`
}

// buildStatement returns the canonical in-toto statement Sign signs for
// obj. Its predicate is obj's canonical JSON, which is also the blob
// cosign verify-blob-attestation hashes against the subject digest.
func buildStatement(obj *artifact.Object) ([]byte, error) {
	if obj == nil {
		return nil, fmt.Errorf("%w: nil object", artifact.ErrInvalid)
	}
	predicate, err := obj.CanonicalJSON()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(predicate)
	raw, err := json.Marshal(statement{
		Type:          StatementType,
		Subject:       []subject{{Name: obj.Metadata.Name, Digest: map[string]string{"sha256": hex.EncodeToString(sum[:])}}},
		PredicateType: obj.Kind.PredicateType(),
		Predicate:     predicate,
	})
	if err != nil {
		return nil, err
	}
	return canonjson.Transform(raw)
}

// Sign signs obj with signer (an ECDSA P-256 or Ed25519 private key) and
// returns the Sigstore bundle JSON and the exact DSSE payload bytes (the
// in-toto statement). The bundle is canonical JSON; store it verbatim.
func Sign(obj *artifact.Object, signer crypto.Signer) (bundle []byte, payload []byte, err error) {
	priv, err := checkPrivate(signer)
	if err != nil {
		return nil, nil, err
	}
	keyID, err := KeyID(priv.Public())
	if err != nil {
		return nil, nil, err
	}
	payload, err = buildStatement(obj)
	if err != nil {
		return nil, nil, err
	}
	bundle, err = signPayload(priv, keyID, PayloadType, payload)
	if err != nil {
		return nil, nil, err
	}
	return bundle, payload, nil
}

// signPayload signs payload as a DSSE envelope of payloadType with priv
// (whose key id is keyID) and wraps it in a canonical v0.3 bundle.
func signPayload(priv crypto.Signer, keyID, payloadType string, payload []byte) ([]byte, error) {
	s, err := signature.LoadSigner(priv, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKeyType, err)
	}
	envJSON, err := sigdsse.WrapSigner(s, payloadType).SignMessage(bytes.NewReader(payload))
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	var env ssldsse.Envelope
	if err := json.Unmarshal(envJSON, &env); err != nil || len(env.Signatures) != 1 {
		return nil, fmt.Errorf("sign: unexpected DSSE envelope from signer: %v", err)
	}
	sig, err := base64.StdEncoding.DecodeString(env.Signatures[0].Sig)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	pb := &protobundle.Bundle{
		MediaType: BundleMediaType,
		VerificationMaterial: &protobundle.VerificationMaterial{
			Content: &protobundle.VerificationMaterial_PublicKey{PublicKey: &protocommon.PublicKeyIdentifier{Hint: keyID}},
		},
		Content: &protobundle.Bundle_DsseEnvelope{DsseEnvelope: &protodsse.Envelope{
			Payload:     payload,
			PayloadType: payloadType,
			Signatures:  []*protodsse.Signature{{Sig: sig}},
		}},
	}
	raw, err := protojson.Marshal(pb)
	if err != nil {
		return nil, fmt.Errorf("sign: marshal bundle: %w", err)
	}
	bundle, err := canonjson.Transform(raw)
	if err != nil {
		return nil, fmt.Errorf("sign: canonicalise bundle: %w", err)
	}
	return bundle, nil
}
