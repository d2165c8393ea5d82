package atomicfile_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/mcpready/mcpready/internal/atomicfile"
)

// The agent keeps its last-known-good artifacts in one file and replaces
// it whole. A reader that opened the old file goes on reading the old
// content (on Unix); one that opens the path afterwards reads the new;
// no reader ever sees a mix, and no temporary file is left behind.
func ExampleWriteFile() {
	dir, err := os.MkdirTemp("", "atomicfile")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "state", "lkg.json") // "state" is created

	if err := atomicfile.WriteFile(path, []byte(`{"version":1,"artifacts":3}`), 0o600); err != nil {
		panic(err)
	}
	old, err := os.Open(path)
	if err != nil {
		panic(err)
	}
	defer old.Close()

	if err := atomicfile.WriteFile(path, []byte(`{"version":2,"artifacts":4}`), 0o600); err != nil {
		panic(err)
	}
	b, _ := io.ReadAll(old)
	fmt.Printf("reader of the old file: %s\n", b)
	b, _ = os.ReadFile(path)
	fmt.Printf("reader of the path:     %s\n", b)

	fi, _ := os.Stat(path)
	entries, _ := os.ReadDir(filepath.Dir(path))
	fmt.Println(fi.Mode(), len(entries), entries[0].Name())
	// Output:
	// reader of the old file: {"version":1,"artifacts":3}
	// reader of the path:     {"version":2,"artifacts":4}
	// -rw------- 1 lkg.json
}

// CreateNew writes a file only if none is there, as key generation does:
// an existing key is never overwritten.
func ExampleCreateNew() {
	dir, err := os.MkdirTemp("", "atomicfile")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "observer.key")

	err = atomicfile.CreateNew(path, []byte("-----BEGIN PRIVATE KEY-----\n(first)\n"), 0o600)
	fmt.Println(err)
	err = atomicfile.CreateNew(path, []byte("-----BEGIN PRIVATE KEY-----\n(second)\n"), 0o600)
	fmt.Println(errors.Is(err, os.ErrExist))
	b, _ := os.ReadFile(path)
	fmt.Printf("%q\n", b)
	entries, _ := os.ReadDir(dir)
	fmt.Println(len(entries))
	// Output:
	// <nil>
	// true
	// "-----BEGIN PRIVATE KEY-----\n(first)\n"
	// 1
}
