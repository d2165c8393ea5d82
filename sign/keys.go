package sign

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"os"

	"github.com/secure-systems-lab/go-securesystemslib/encrypted"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/mcpready/mcpready/internal/atomicfile"
)

// Algorithm names a signing key algorithm.
type Algorithm string

// The supported algorithms. ECDSA signs over SHA-256; Ed25519 is pure
// Ed25519 (not Ed25519ph), as cosign uses them.
const (
	AlgorithmECDSAP256 Algorithm = "ecdsa-p256"
	AlgorithmEd25519   Algorithm = "ed25519"
)

// PEM block types. Private keys use cosign's encrypted format; the older
// cosign header is accepted when loading.
const (
	pemEncryptedPrivateKey       = string(cryptoutils.EncryptedSigstorePrivateKeyPEMType) // "ENCRYPTED SIGSTORE PRIVATE KEY"
	pemLegacyEncryptedPrivateKey = "ENCRYPTED COSIGN PRIVATE KEY"
	pemPublicKey                 = string(cryptoutils.PublicKeyPEMType) // "PUBLIC KEY"
)

// Key errors. Errors returned by the key functions wrap one of them.
var (
	// ErrKeyType is a key of an unsupported type or curve, or a public
	// key where a private key is needed (and the reverse).
	ErrKeyType = errors.New("unsupported key type")
	// ErrKeyEncoding is key data that is not a PEM key this package reads.
	ErrKeyEncoding = errors.New("malformed key")
	// ErrPassword is a password that does not decrypt the private key.
	ErrPassword = errors.New("wrong password for private key")
	// ErrKeyExists is WriteKeyPair refusing to overwrite a key file.
	ErrKeyExists = errors.New("key file already exists")
)

// ParseAlgorithm accepts "ecdsa-p256" or "ed25519".
func ParseAlgorithm(s string) (Algorithm, error) {
	switch a := Algorithm(s); a {
	case AlgorithmECDSAP256, AlgorithmEd25519:
		return a, nil
	}
	return "", fmt.Errorf("%w: algorithm %q (want %s or %s)", ErrKeyType, s, AlgorithmECDSAP256, AlgorithmEd25519)
}

// GenerateKey returns a new private key of algorithm alg.
func GenerateKey(alg Algorithm) (crypto.Signer, error) {
	switch alg {
	case AlgorithmECDSAP256:
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case AlgorithmEd25519:
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		return priv, err
	}
	_, err := ParseAlgorithm(string(alg))
	return nil, err
}

// checkPublic returns nil if pub is an ECDSA P-256 or Ed25519 public key.
func checkPublic(pub crypto.PublicKey) error {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return fmt.Errorf("%w: ECDSA curve %s (want P-256)", ErrKeyType, k.Curve.Params().Name)
		}
		return nil
	case ed25519.PublicKey:
		if len(k) != ed25519.PublicKeySize {
			return fmt.Errorf("%w: Ed25519 public key of %d bytes", ErrKeyType, len(k))
		}
		return nil
	case nil:
		return fmt.Errorf("%w: no public key", ErrKeyType)
	}
	return fmt.Errorf("%w: %T (want ECDSA P-256 or Ed25519)", ErrKeyType, pub)
}

// checkPrivate returns nil if priv is an ECDSA P-256 or Ed25519 private key.
func checkPrivate(priv crypto.PrivateKey) (crypto.Signer, error) {
	switch k := priv.(type) {
	case *ecdsa.PrivateKey:
		return k, checkPublic(k.Public())
	case ed25519.PrivateKey:
		if len(k) != ed25519.PrivateKeySize {
			return nil, fmt.Errorf("%w: Ed25519 private key of %d bytes", ErrKeyType, len(k))
		}
		return k, nil
	case *ed25519.PrivateKey:
		if k == nil {
			return nil, fmt.Errorf("%w: no private key", ErrKeyType)
		}
		return checkPrivate(*k)
	case nil:
		return nil, fmt.Errorf("%w: no private key", ErrKeyType)
	}
	return nil, fmt.Errorf("%w: %T (want ECDSA P-256 or Ed25519)", ErrKeyType, priv)
}

// MarshalPrivateKey encrypts priv with password (which may be empty) in
// cosign's format: PKCS#8 DER sealed with scrypt and NaCl secretbox,
// PEM type "ENCRYPTED SIGSTORE PRIVATE KEY".
func MarshalPrivateKey(priv crypto.Signer, password []byte) ([]byte, error) {
	k, err := checkPrivate(priv)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKeyType, err)
	}
	sealed, err := encrypted.Encrypt(der, password)
	if err != nil {
		return nil, fmt.Errorf("encrypt private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemEncryptedPrivateKey, Bytes: sealed}), nil
}

// LoadPrivateKey decrypts a private key in cosign's format (also the older
// "ENCRYPTED COSIGN PRIVATE KEY" header). A wrong password wraps
// ErrPassword; a public key or an unsupported algorithm wraps ErrKeyType.
func LoadPrivateKey(pemData, password []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(pemData)
	if block == nil {
		return nil, fmt.Errorf("%w: no PEM block found", ErrKeyEncoding)
	}
	switch block.Type {
	case pemEncryptedPrivateKey, pemLegacyEncryptedPrivateKey:
	case pemPublicKey:
		return nil, fmt.Errorf("%w: this is a public key; signing needs the private key (.key)", ErrKeyType)
	default:
		return nil, fmt.Errorf("%w: PEM type %q (want %q)", ErrKeyEncoding, block.Type, pemEncryptedPrivateKey)
	}
	der, err := encrypted.Decrypt(block.Bytes, password)
	if err != nil {
		if err.Error() == "encrypted: decryption failed" {
			return nil, ErrPassword
		}
		return nil, fmt.Errorf("%w: %v", ErrKeyEncoding, err)
	}
	priv, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKeyType, err)
	}
	return checkPrivate(priv)
}

// MarshalPublicKey returns pub as a PEM "PUBLIC KEY" (PKIX DER).
func MarshalPublicKey(pub crypto.PublicKey) ([]byte, error) {
	if err := checkPublic(pub); err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKeyType, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemPublicKey, Bytes: der}), nil
}

// LoadPublicKey reads a PEM "PUBLIC KEY". A private key or an unsupported
// algorithm wraps ErrKeyType.
func LoadPublicKey(pemData []byte) (crypto.PublicKey, error) {
	block, _ := pem.Decode(pemData)
	if block == nil {
		return nil, fmt.Errorf("%w: no PEM block found", ErrKeyEncoding)
	}
	switch block.Type {
	case pemPublicKey:
	case pemEncryptedPrivateKey, pemLegacyEncryptedPrivateKey, "PRIVATE KEY", "EC PRIVATE KEY":
		return nil, fmt.Errorf("%w: this is a private key; verification needs the public key (.pub)", ErrKeyType)
	default:
		return nil, fmt.Errorf("%w: PEM type %q (want %q)", ErrKeyEncoding, block.Type, pemPublicKey)
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKeyType, err)
	}
	if err := checkPublic(pub); err != nil {
		return nil, err
	}
	return pub, nil
}

// KeyID returns the key id of pub: standard base64 of the SHA-256 of its
// PKIX DER encoding (the Sigstore bundle publicKey.hint convention).
func KeyID(pub crypto.PublicKey) (string, error) {
	if err := checkPublic(pub); err != nil {
		return "", err
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrKeyType, err)
	}
	sum := sha256.Sum256(der)
	return base64.StdEncoding.EncodeToString(sum[:]), nil
}

// WriteKeyPair generates a key of algorithm alg and writes pathPrefix+".key"
// (encrypted with password, mode 0600) and pathPrefix+".pub". It refuses
// to overwrite an existing file (ErrKeyExists); remove the files first to
// replace a key pair.
func WriteKeyPair(pathPrefix string, alg Algorithm, password []byte) (crypto.Signer, error) {
	priv, err := GenerateKey(alg)
	if err != nil {
		return nil, err
	}
	privPEM, err := MarshalPrivateKey(priv, password)
	if err != nil {
		return nil, err
	}
	pubPEM, err := MarshalPublicKey(priv.Public())
	if err != nil {
		return nil, err
	}
	keyPath, pubPath := pathPrefix+".key", pathPrefix+".pub"
	for _, p := range []string{keyPath, pubPath} {
		if _, err := os.Lstat(p); err == nil {
			return nil, fmt.Errorf("%w: %s", ErrKeyExists, p)
		}
	}
	if err := writeNew(keyPath, privPEM, 0o600); err != nil {
		return nil, err
	}
	if err := writeNew(pubPath, pubPEM, 0o644); err != nil {
		_ = os.Remove(keyPath)
		return nil, err
	}
	return priv, nil
}

// writeNew creates path exclusively and atomically (atomicfile.CreateNew):
// a crash or a failed write leaves no partial key behind.
func writeNew(path string, data []byte, perm os.FileMode) error {
	err := atomicfile.CreateNew(path, data, perm)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%w: %s", ErrKeyExists, path)
	}
	return err
}

// ReadPrivateKeyFile reads and decrypts a private key file.
func ReadPrivateKeyFile(path string, password []byte) (crypto.Signer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	k, err := LoadPrivateKey(data, password)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// ReadPublicKeyFile reads a public key file.
func ReadPublicKeyFile(path string) (crypto.PublicKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	k, err := LoadPublicKey(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// loadVerifier returns the sigstore verifier for pub.
func loadVerifier(pub crypto.PublicKey) (signature.Verifier, error) {
	if err := checkPublic(pub); err != nil {
		return nil, err
	}
	return signature.LoadVerifier(pub, crypto.SHA256)
}
