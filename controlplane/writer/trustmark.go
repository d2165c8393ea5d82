package writer

// The TrustPolicy high-water mark: the newest TrustPolicy (name, signed
// version, bundle digest) this Writer has taken from the store, kept
// outside etcd. The chain rule picks the active TrustPolicy from what etcd
// holds, so without it a compromised etcd that holds an older, validly
// signed TrustPolicy again (or none) would make the write path trust a key
// revoked since. Against the mark, a pick that is older, or at the same
// version another bundle, is refused (ErrTrustRolledBack): nothing but a
// root-signed TrustPolicy that is the mark's own bundle or its successor
// is accepted until etcd holds the mark again.
//
// The mark only rises, and is written (atomically) before the TrustPolicy
// that raised it is used. With Options.TrustMarkPath it outlives the
// process; without it, it lasts as long as the Writer. A replica that
// starts without one takes what etcd holds first (it has nothing to
// compare with).

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/internal/atomicfile"
	"github.com/mcpready/mcpready/sign"
)

// ErrTrustRolledBack: the store's newest TrustPolicy is older than, or
// forks from, the newest this Writer has accepted (the high-water mark).
var ErrTrustRolledBack = errors.New("the stored TrustPolicy is older than the newest this replica accepted")

// trustMarkFile is the mark file's content.
type trustMarkFile struct {
	Format  int    `json:"format"`
	Name    string `json:"name"`
	Version string `json:"version"`
	Digest  string `json:"digest"`
}

// readTrustMark reads the mark file at path; a missing file (or no path)
// is no mark.
func readTrustMark(path string) (sign.TrustRef, error) {
	if path == "" {
		return sign.TrustRef{}, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return sign.TrustRef{}, nil
	}
	if err != nil {
		return sign.TrustRef{}, err
	}
	var f trustMarkFile
	if err := json.Unmarshal(data, &f); err != nil {
		return sign.TrustRef{}, fmt.Errorf("TrustPolicy high-water mark %s: %w", path, err)
	}
	if f.Format != 1 || f.Name == "" || f.Digest == "" || artifact.ValidVersion(f.Version) != nil {
		return sign.TrustRef{}, fmt.Errorf("TrustPolicy high-water mark %s: not a mark (format %d, %q version %q)", path, f.Format, f.Name, f.Version)
	}
	return sign.TrustRef{Name: f.Name, Version: f.Version, Digest: f.Digest}, nil
}

// belowMark refuses ref, the store's pick (zero when the store holds no
// TrustPolicy that verifies), when it is below the mark. w.mu must be held.
func (w *Writer) belowMark(ref sign.TrustRef) error {
	if w.mark == (sign.TrustRef{}) || ref.Digest == w.mark.Digest {
		return nil
	}
	if ref != (sign.TrustRef{}) {
		if c, err := artifact.CompareVersions(ref.Version, w.mark.Version); err == nil && c > 0 {
			return nil
		}
	}
	held := "none that verifies"
	if ref != (sign.TrustRef{}) {
		held = ref.String()
	}
	return fmt.Errorf("%w: the store holds %s, this replica accepted %s; apply that TrustPolicy or its successor again", ErrTrustRolledBack, held, w.mark)
}

// raiseMark makes ref, newer than the mark, the mark, writing it first.
// w.mu must be held.
func (w *Writer) raiseMark(ref sign.TrustRef) error {
	if ref == w.mark {
		return nil
	}
	if w.o.TrustMarkPath != "" {
		data, err := json.Marshal(trustMarkFile{Format: 1, Name: ref.Name, Version: ref.Version, Digest: ref.Digest})
		if err != nil {
			return err
		}
		if err := atomicfile.WriteFile(w.o.TrustMarkPath, data, 0o600); err != nil {
			return fmt.Errorf("writing the TrustPolicy high-water mark: %w", err)
		}
	}
	w.mark = ref
	return nil
}
