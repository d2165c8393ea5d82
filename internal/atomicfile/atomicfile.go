// Package atomicfile writes files so that readers (and a crash) see either
// the old content or the new, never a partial file: temp file in the same
// directory, fsync, rename (or link, to create without replacing),
// directory fsync. It does nothing else.
package atomicfile

import (
	"os"
	"path/filepath"
)

// WriteFile atomically replaces path with data (mode perm), creating the
// parent directory (mode 0700) when missing.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return write(path, data, perm, os.Rename)
}

// CreateNew atomically creates path with data (mode perm), creating the
// parent directory (mode 0700) when missing; it never replaces an
// existing file (an error matching os.ErrExist), and a crash leaves either
// no file or the whole one.
func CreateNew(path string, data []byte, perm os.FileMode) error {
	return write(path, data, perm, os.Link)
}

// write writes data to a synced temp file beside path, places it at path
// with place (rename or link) and syncs the directory.
func write(path string, data []byte, perm os.FileMode, place func(tmp, path string) error) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after a rename; removes the link source
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := place(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
