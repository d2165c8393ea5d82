package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpready/mcpready/sign"
)

// TestAgentKeyEncryptedAtRest: with a password configured the agent key
// it creates is encrypted on disk (it used to be written in the clear
// whatever was configured), written whole (no temp file left), read back
// with the password on restart, and refused without it.
func TestAgentKeyEncryptedAtRest(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "agent.key")
	pw := []byte("a long passphrase")
	k, err := loadOrCreateKey(path, pw)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sign.LoadPrivateKey(b, nil); err == nil || !strings.Contains(string(b), "ENCRYPTED") {
		t.Fatalf("the agent key is readable without the password:\n%s", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Fatalf("files left: %v", ents)
	}
	again, err := loadOrCreateKey(path, pw)
	if err != nil {
		t.Fatal(err)
	}
	id1, _ := sign.KeyID(k.Public())
	id2, _ := sign.KeyID(again.Public())
	if id1 != id2 {
		t.Fatal("restart created another key")
	}
	if _, err := loadOrCreateKey(path, nil); err == nil {
		t.Fatal("the encrypted key loaded without the password")
	}
}
