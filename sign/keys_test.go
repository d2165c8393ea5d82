package sign

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/secure-systems-lab/go-securesystemslib/encrypted"
)

func TestKeyRoundTrip(t *testing.T) {
	// scrypt is deliberately slow: one password case per algorithm.
	for alg, pw := range map[Algorithm]string{AlgorithmECDSAP256: "correct horse", AlgorithmEd25519: ""} {
		t.Run(string(alg), func(t *testing.T) {
			key := testKey(t, alg)
			privPEM, err := MarshalPrivateKey(key, []byte(pw))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(privPEM, []byte("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----")) {
				t.Fatalf("PEM header: %s", privPEM[:50])
			}
			got, err := LoadPrivateKey(privPEM, []byte(pw))
			if err != nil {
				t.Fatal(err)
			}
			if !key.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(got.Public()) {
				t.Fatal("loaded key differs")
			}
			if _, err := LoadPrivateKey(privPEM, []byte(pw+"x")); !errors.Is(err, ErrPassword) {
				t.Fatalf("wrong password: %v", err)
			}
			pubPEM, err := MarshalPublicKey(key.Public())
			if err != nil {
				t.Fatal(err)
			}
			pub, err := LoadPublicKey(pubPEM)
			if err != nil {
				t.Fatal(err)
			}
			id1, _ := KeyID(pub)
			id2, _ := KeyID(key.Public())
			if id1 != id2 || len(id1) != 44 {
				t.Fatalf("key ids %q %q", id1, id2)
			}
		})
	}
}

func TestLegacyCosignHeader(t *testing.T) {
	key := testKey(t, AlgorithmECDSAP256)
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	sealed, err := encrypted.Encrypt(der, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	legacy := pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED COSIGN PRIVATE KEY", Bytes: sealed})
	if _, err := LoadPrivateKey(legacy, []byte("pw")); err != nil {
		t.Fatal(err)
	}
}

func TestKeyErrors(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	rsaDER, _ := x509.MarshalPKCS8PrivateKey(rsaKey)
	rsaSealed, _ := encrypted.Encrypt(rsaDER, nil)
	rsaPub, _ := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	p384Pub, _ := x509.MarshalPKIXPublicKey(&p384.PublicKey)
	pubPEM, _ := MarshalPublicKey(testKey(t, AlgorithmEd25519).Public())
	privPEM, _ := MarshalPrivateKey(testKey(t, AlgorithmEd25519), nil)
	plainDER, _ := x509.MarshalPKCS8PrivateKey(testKey(t, AlgorithmEd25519))
	enc := func(typ string, b []byte) []byte { return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}) }

	privTests := []struct {
		name string
		pem  []byte
		want error
	}{
		{"empty", nil, ErrKeyEncoding},
		{"garbage", []byte("hello"), ErrKeyEncoding},
		{"public key given", pubPEM, ErrKeyType},
		{"rsa", enc("ENCRYPTED SIGSTORE PRIVATE KEY", rsaSealed), ErrKeyType},
		{"unencrypted pkcs8", enc("PRIVATE KEY", plainDER), ErrKeyEncoding},
		{"bad ciphertext", enc("ENCRYPTED SIGSTORE PRIVATE KEY", []byte("{}")), ErrKeyEncoding},
		{"truncated", privPEM[:len(privPEM)/2], ErrKeyEncoding},
	}
	for _, tt := range privTests {
		if _, err := LoadPrivateKey(tt.pem, nil); !errors.Is(err, tt.want) {
			t.Errorf("LoadPrivateKey %s: %v, want %v", tt.name, err, tt.want)
		}
	}
	pubTests := []struct {
		name string
		pem  []byte
		want error
	}{
		{"empty", nil, ErrKeyEncoding},
		{"private key given", privPEM, ErrKeyType},
		{"rsa", enc("PUBLIC KEY", rsaPub), ErrKeyType},
		{"p384", enc("PUBLIC KEY", p384Pub), ErrKeyType},
		{"bad der", enc("PUBLIC KEY", []byte{1, 2, 3}), ErrKeyType},
		{"certificate", enc("CERTIFICATE", []byte{1}), ErrKeyEncoding},
	}
	for _, tt := range pubTests {
		if _, err := LoadPublicKey(tt.pem); !errors.Is(err, tt.want) {
			t.Errorf("LoadPublicKey %s: %v, want %v", tt.name, err, tt.want)
		}
	}
	if _, err := MarshalPrivateKey(rsaKey, nil); !errors.Is(err, ErrKeyType) {
		t.Errorf("MarshalPrivateKey(rsa): %v", err)
	}
	if _, err := MarshalPrivateKey(p384, nil); !errors.Is(err, ErrKeyType) {
		t.Errorf("MarshalPrivateKey(p384): %v", err)
	}
	if _, _, err := Sign(fixture(t, "Policy"), rsaKey); !errors.Is(err, ErrKeyType) {
		t.Errorf("Sign(rsa): %v", err)
	}
	if _, err := VerifyWithKey(nil, &rsaKey.PublicKey); !errors.Is(err, ErrKeyType) {
		t.Errorf("VerifyWithKey(rsa): %v", err)
	}
	if _, err := KeyID(&rsaKey.PublicKey); !errors.Is(err, ErrKeyType) {
		t.Errorf("KeyID(rsa): %v", err)
	}
	if _, err := GenerateKey("rsa-2048"); !errors.Is(err, ErrKeyType) {
		t.Errorf("GenerateKey(rsa): %v", err)
	}
	if _, err := ParseAlgorithm("ed448"); !errors.Is(err, ErrKeyType) {
		t.Errorf("ParseAlgorithm: %v", err)
	}
}

func TestWriteKeyPair(t *testing.T) {
	dir := t.TempDir()
	prefix := filepath.Join(dir, "provider")
	key, err := WriteKeyPair(prefix, AlgorithmEd25519, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(prefix + ".key")
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("private key mode %v", st.Mode().Perm())
	}
	priv, err := ReadPrivateKeyFile(prefix+".key", []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ReadPublicKeyFile(prefix + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	if !key.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(pub) || !priv.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(pub) {
		t.Fatal("written keys differ")
	}
	if _, err := WriteKeyPair(prefix, AlgorithmEd25519, nil); !errors.Is(err, ErrKeyExists) {
		t.Fatalf("overwrite: %v", err)
	}
	if _, err := ReadPrivateKeyFile(prefix+".key", []byte("nope")); !errors.Is(err, ErrPassword) {
		t.Fatalf("wrong password: %v", err)
	}
	if _, err := ReadPrivateKeyFile(filepath.Join(dir, "missing.key"), nil); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
}
