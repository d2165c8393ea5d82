package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sub", "f.json")
	for _, content := range []string{"one", "two, longer"} {
		if err := WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil || string(b) != content {
			t.Fatalf("got %q %v", b, err)
		}
	}
	fi, _ := os.Stat(p)
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	entries, _ := os.ReadDir(filepath.Dir(p))
	if len(entries) != 1 {
		t.Fatalf("temp files left behind: %v", entries)
	}
}

// TestCreateNew: creates a file whole, never replaces one, leaves no
// temp file.
func TestCreateNew(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "k")
	if err := CreateNew(p, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CreateNew(p, []byte("two"), 0o600); !errors.Is(err, os.ErrExist) {
		t.Fatalf("replaced: %v", err)
	}
	b, _ := os.ReadFile(p)
	ents, _ := os.ReadDir(dir)
	if string(b) != "one" || len(ents) != 1 {
		t.Fatalf("content %q, %d files", b, len(ents))
	}
}
