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
// compare with), unless it is given a seed (Options.TrustSeed): a
// root-signed TrustPolicy from the operator, which becomes the mark first.

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

// seedMark raises the mark to Options.TrustSeed, verified against the
// root key, when the seed is newer (or there is no mark). Called by New,
// before the Writer is shared.
func (w *Writer) seedMark() error {
	if len(w.o.TrustSeed) == 0 {
		return nil
	}
	t, err := sign.NewTrust(w.o.TrustSeed, w.o.Root, w.o.Now())
	if err != nil {
		return fmt.Errorf("TrustPolicy seed: %w", err)
	}
	seed := t.Ref()
	if w.mark == (sign.TrustRef{}) {
		return w.raiseMark(seed)
	}
	c, err := artifact.CompareVersions(seed.Version, w.mark.Version)
	switch {
	case err != nil:
		return fmt.Errorf("TrustPolicy seed %s against the mark %s: %w", seed, w.mark, err)
	case c > 0:
		return w.raiseMark(seed)
	case c == 0 && seed.Digest != w.mark.Digest:
		return fmt.Errorf("TrustPolicy seed %s forks from this replica's mark %s (same version, another bundle)", seed, w.mark)
	}
	w.o.Logger.Info("TrustPolicy seed not newer than this replica's mark: mark kept", "seed", seed.String(), "mark", w.mark.String())
	return nil
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
