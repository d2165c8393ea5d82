package demo

import (
	"crypto"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/mcpready/mcpready/sign"
)

// Demo key names. Each is stored as NAME.key (encrypted with an empty
// password) and NAME.pub in the keys directory.
const (
	KeyRoot      = "root"
	KeyOrg       = "org"
	KeyProviderA = "provider-a"
	KeyProviderB = "provider-b"
	KeyObserver  = "observer" // the control plane's: passive Evidence, lifecycle entries
	KeyProber    = "prober"   // the demo's synthetic Evidence
	KeyAgent     = "agent"
)

// KeyNames lists every demo key name.
var KeyNames = []string{KeyRoot, KeyOrg, KeyProviderA, KeyProviderB, KeyObserver, KeyProber, KeyAgent}

// Keys are the demo signing keys by name.
type Keys map[string]crypto.Signer

// LoadOrCreateKeys reads each demo key pair from dir, creating any that is
// missing (ECDSA P-256, empty password). A key file without its public
// half (or the reverse) is an error rather than being overwritten.
func LoadOrCreateKeys(dir string) (Keys, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("demo: keys directory: %w", err)
	}
	keys := Keys{}
	for _, name := range KeyNames {
		prefix := filepath.Join(dir, name)
		_, errKey := os.Stat(prefix + ".key")
		_, errPub := os.Stat(prefix + ".pub")
		var (
			k   crypto.Signer
			err error
		)
		switch {
		case errKey == nil && errPub == nil:
			k, err = readPair(prefix)
		case errors.Is(errKey, fs.ErrNotExist) && errors.Is(errPub, fs.ErrNotExist):
			k, err = sign.WriteKeyPair(prefix, sign.AlgorithmECDSAP256, nil)
		default:
			err = fmt.Errorf("only one of %s.key and %s.pub exists (%v, %v)", prefix, prefix, errKey, errPub)
		}
		if err != nil {
			return nil, fmt.Errorf("demo: key %s: %w", name, err)
		}
		keys[name] = k
	}
	return keys, nil
}

// readPair reads prefix.key and checks that prefix.pub is its public half.
func readPair(prefix string) (crypto.Signer, error) {
	k, err := sign.ReadPrivateKeyFile(prefix+".key", nil)
	if err != nil {
		return nil, err
	}
	pub, err := sign.ReadPublicKeyFile(prefix + ".pub")
	if err != nil {
		return nil, err
	}
	want, err := sign.KeyID(k.Public())
	if err != nil {
		return nil, err
	}
	if got, err := sign.KeyID(pub); err != nil || got != want {
		return nil, fmt.Errorf("%s.pub is not the public key of %s.key", prefix, prefix)
	}
	return k, nil
}
