package subscribe

// High-water marks: the highest signed provenance.version installed per
// kind and name, with the digest of the bundle that carried it. A resource
// is installed only when artifact.CheckNewer accepts it against its mark
// (strictly newer, or the very bundle the mark came from) and
// artifact.CheckExpiry accepts it; a removal keeps the mark, so a removed
// artifact comes back only at a newer version. A removal carrying a
// signed tombstone for the exact version held marks it deleted: then not
// even the very bundle it came from is accepted again.
//
// The marks are kept in their own file (Options.HighWaterPath, by default
// the last known good path + ".versions"), written atomically before the
// snapshot that raised them is published, and only ever raised: a write
// merges with what the file already holds. The last known good file
// carries a copy of the marks, and Load takes, per artifact, the highest
// of the marks file, that copy and the versions in the last known good
// file, so rewriting either file alone (an older LKG, a deleted or lowered
// marks file) cannot roll the agent back, not even for an artifact it
// removed.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/internal/atomicfile"
	"github.com/mcpready/mcpready/sign"
)

// mark is one artifact's high-water mark.
type mark struct {
	Version string `json:"version"`
	Digest  string `json:"digest"`
	// Deleted: a signed tombstone removed this exact version.
	Deleted bool `json:"deleted,omitempty"`
}

type marks map[artifact.Kind]map[string]mark

// raise sets the mark of (k, name) to m when m is higher, or when it
// marks the same version deleted; it reports whether anything changed.
func (ms marks) raise(k artifact.Kind, name string, m mark) bool {
	cur, ok := ms[k][name]
	if ok {
		if c, err := artifact.CompareVersions(m.Version, cur.Version); err != nil || c < 0 || (c == 0 && (!m.Deleted || cur.Deleted)) {
			return false
		}
	}
	if ms[k] == nil {
		ms[k] = map[string]mark{}
	}
	ms[k][name] = m
	return true
}

// head is the highest mark of kind k whatever the name (a TrustPolicy's
// position in the organisation's one chain), with its name.
func (ms marks) head(k artifact.Kind) (sign.TrustRef, bool) {
	var best sign.TrustRef
	found := false
	for n, m := range ms[k] {
		if c, err := artifact.CompareVersions(m.Version, best.Version); !found || (err == nil && c > 0) {
			best, found = sign.TrustRef{Name: n, Version: m.Version, Digest: m.Digest}, true
		}
	}
	return best, found
}

type marksFile struct {
	Format int   `json:"format"`
	Marks  marks `json:"marks"`
}

func (c *Client) marksPath() string {
	if c.opts.HighWaterPath != "" {
		return c.opts.HighWaterPath
	}
	if c.opts.LKGPath != "" {
		return c.opts.LKGPath + ".versions"
	}
	return ""
}

// readMarks reads the marks file; a missing one is empty.
func readMarks(path string) (marks, error) {
	ms := marks{}
	if path == "" {
		return ms, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return ms, nil
	}
	if err != nil {
		return nil, err
	}
	var f marksFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("sync: high-water marks file %s: %w", path, err)
	}
	for k, m := range f.Marks {
		for n, v := range m {
			if artifact.ValidVersion(v.Version) == nil {
				ms.raise(k, n, v)
			}
		}
	}
	return ms, nil
}

// fresh checks an offered, verified resource against its mark and its
// expiry. c.mu must be held.
func (c *Client) fresh(r *Resource, now time.Time) error {
	obj := r.Verified.Object
	if err := artifact.CheckExpiry(obj, now); err != nil {
		return fmt.Errorf("%w: %w", ErrRejected, err)
	}
	held, ok := c.marks[r.Kind][r.Name]
	if held.Deleted {
		held.Digest = "" // deleted by a signed tombstone: the same bundle is a rollback too
	}
	if err := artifact.CheckNewer(r.Kind, r.Name, obj.Version(), artifact.Digest(r.Bundle), held.Version, held.Digest, ok); err != nil {
		return fmt.Errorf("%w: %w", ErrRejected, err)
	}
	return nil
}

// raiseMarks raises the marks to the versions res holds, marks deleted
// the ones a signed tombstone removed and, when any changed, writes them
// (merged with the file) before anything is published. c.mu must be held.
func (c *Client) raiseMarks(res map[artifact.Kind]map[string]*Resource, deleted []*Resource) error {
	next := marks{}
	for k, m := range c.marks {
		for n, v := range m {
			next.raise(k, n, v)
		}
	}
	changed := false
	for k, m := range res {
		for n, r := range m {
			if next.raise(k, n, mark{Version: r.Verified.Object.Version(), Digest: artifact.Digest(r.Bundle)}) {
				changed = true
			}
		}
	}
	for _, r := range deleted {
		if next.raise(r.Kind, r.Name, mark{Version: r.Verified.Object.Version(), Digest: artifact.Digest(r.Bundle), Deleted: true}) {
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return c.writeMarks(next)
}

// writeMarks merges next with the marks file, writes it and makes it the
// held marks. c.mu must be held.
func (c *Client) writeMarks(next marks) error {
	if path := c.marksPath(); path != "" {
		onDisk, err := readMarks(path)
		if err != nil {
			return fmt.Errorf("sync: refusing to install: %w", err)
		}
		for k, m := range onDisk {
			for n, v := range m {
				next.raise(k, n, v)
			}
		}
		data, err := json.Marshal(&marksFile{Format: 1, Marks: next})
		if err != nil {
			return err
		}
		if err := atomicfile.WriteFile(path, data, 0o600); err != nil {
			return fmt.Errorf("sync: refusing to install: writing high-water marks: %w", err)
		}
	}
	c.marks = next
	return nil
}
