package demo

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mcpready/mcpready/internal/atomicfile"
	"github.com/mcpready/mcpready/sign"
)

// State is what `mcpready up` remembers between runs so that a restart
// reproduces the same artifacts: the demo servers' ports and the issue
// time stamped into the artifacts.
type State struct {
	IssuedAt time.Time      `json:"issuedAt"`
	Ports    map[string]int `json:"ports"`
}

// refreshAfter is the age after which the demo re-issues its artifacts
// (its synthetic evidence lives 24 hours).
const refreshAfter = 12 * time.Hour

// LoadState reads the state file; a missing file is the zero State.
func LoadState(path string) (State, error) {
	var s State
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return State{}, fmt.Errorf("demo: state %s: %w", path, err)
	}
	return s, nil
}

// Fresh returns s with IssuedAt set to now when it is unset or older than
// the refresh age.
func (s State) Fresh(now time.Time) State {
	if s.IssuedAt.IsZero() || now.Sub(s.IssuedAt) > refreshAfter || s.IssuedAt.After(now) {
		s.IssuedAt = now.UTC().Truncate(time.Second)
	}
	return s
}

// Save writes the state file atomically.
func (s State) Save(path string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(b, '\n'), 0o600)
}

// FileBase is the file name prefix of an artifact in the artifacts
// directory: "<kind>-<name>", lower-case kind, "/" in the name as "_".
func FileBase(it Item) string {
	return strings.ToLower(string(it.Object.Kind)) + "-" + strings.ReplaceAll(it.Object.Metadata.Name, "/", "_")
}

// SignOrReuse signs every item and writes, per artifact, BASE.yaml (the
// authored object), BASE.payload.json (its canonical JSON: the in-toto
// predicate, the blob cosign verifies) and BASE.bundle.json (the Sigstore
// bundle) into dir. An artifact whose payload file already holds the same
// canonical JSON, with a bundle that verifies with the same key, keeps its
// existing bundle, so re-applying it changes nothing.
func SignOrReuse(dir string, items []Item, keys Keys) ([]Signed, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	out := make([]Signed, 0, len(items))
	for _, it := range items {
		base := filepath.Join(dir, FileBase(it))
		canon, err := it.Object.CanonicalJSON()
		if err != nil {
			return nil, fmt.Errorf("demo: %s %s: %w", it.Object.Kind, it.Object.Metadata.Name, err)
		}
		key := keys[it.Key]
		if key == nil {
			return nil, fmt.Errorf("%w: key %q missing", ErrParams, it.Key)
		}
		if b, ok := reusable(base, canon, key.Public()); ok {
			out = append(out, Signed{Item: it, Bundle: b})
			continue
		}
		signed, err := SignAll([]Item{it}, keys)
		if err != nil {
			return nil, err
		}
		y, err := it.Object.YAML()
		if err != nil {
			return nil, err
		}
		for _, f := range []struct {
			ext  string
			data []byte
		}{{".yaml", y}, {".payload.json", canon}, {".bundle.json", signed[0].Bundle}} {
			if err := atomicfile.WriteFile(base+f.ext, f.data, 0o644); err != nil {
				return nil, err
			}
		}
		out = append(out, signed[0])
	}
	return out, nil
}

func reusable(base string, canon []byte, pub any) ([]byte, bool) {
	old, err := os.ReadFile(base + ".payload.json")
	if err != nil || !bytes.Equal(old, canon) {
		return nil, false
	}
	b, err := os.ReadFile(base + ".bundle.json")
	if err != nil {
		return nil, false
	}
	v, err := sign.VerifyWithKey(b, pub)
	if err != nil {
		return nil, false
	}
	got, err := v.Object.CanonicalJSON()
	if err != nil || !bytes.Equal(got, canon) {
		return nil, false
	}
	return b, true
}
