package subscribe

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/atomicfile"
)

// lkgFile is the on-disk last known good configuration: the exact bundles,
// re-verified whenever they are loaded, and a copy of the high-water
// marks (those of removed artifacts are in no bundle), so that deleting
// the marks file alone rolls nothing back.
type lkgFile struct {
	Format    int               `json:"format"`
	Resources []lkgResource     `json:"resources"`
	SotW      map[string]string `json:"sotwVersions,omitempty"`
	Marks     marks             `json:"marks,omitempty"`
}

type lkgResource struct {
	Kind    artifact.Kind `json:"kind"`
	Name    string        `json:"name"`
	Version string        `json:"version"`
	Bundle  []byte        `json:"bundle"`
}

// saveLKG writes the current snapshot atomically: temp file, fsync, rename,
// directory fsync. c.mu must be held.
func (c *Client) saveLKG() error {
	if c.opts.LKGPath == "" {
		return nil
	}
	snap := c.cur.Load()
	f := lkgFile{Format: 1, SotW: map[string]string{}, Marks: c.marks}
	for _, k := range c.kinds() {
		for _, r := range snap.list(k, true) {
			f.Resources = append(f.Resources, lkgResource{Kind: k, Name: r.Name, Version: r.Version, Bundle: r.Bundle})
		}
	}
	for k, v := range c.sotw {
		f.SotW[string(k)] = v
	}
	data, err := json.Marshal(&f)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(c.opts.LKGPath, data, 0o600)
}

// Load starts from the last known good configuration on disk, verifying
// every bundle again (against the root and the stored TrustPolicy). A
// missing file is not an error; resources that no longer verify are dropped
// and reported in the returned count.
//
// The high-water marks are read first: a marks file that cannot be read
// fails Load (the agent does not start from a configuration it cannot
// check for rollback), and a stored resource older than its mark is
// dropped.
//
// Load never writes the last known good file, neither part-way (a crash
// would leave only what was loaded so far) nor after dropping what no
// longer verifies: the next accepted update writes the whole snapshot.
func (c *Client) Load() (dropped int, err error) {
	ms, err := readMarks(c.marksPath())
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	c.loading = true
	defer func() {
		c.mu.Lock()
		c.loading = false
		c.mu.Unlock()
	}()
	for k, m := range ms {
		for n, v := range m {
			c.marks.raise(k, n, v)
		}
	}
	c.mu.Unlock()
	if c.opts.LKGPath == "" {
		return 0, nil
	}
	data, err := os.ReadFile(c.opts.LKGPath)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var f lkgFile
	if err := json.Unmarshal(data, &f); err != nil {
		return 0, fmt.Errorf("sync: last known good file %s: %w", c.opts.LKGPath, err)
	}
	c.mu.Lock()
	repair := false // the copy holds marks the marks file lacks (it was deleted or lowered)
	for k, m := range f.Marks {
		for n, v := range m {
			if artifact.ValidVersion(v.Version) == nil && c.marks.raise(k, n, v) {
				repair = true
			}
		}
	}
	if repair {
		if err := c.writeMarks(c.marks); err != nil {
			c.mu.Unlock()
			return 0, err
		}
	}
	c.mu.Unlock()
	byKind := map[artifact.Kind][]*mcpreadyv1.Resource{}
	for _, r := range f.Resources {
		byKind[r.Kind] = append(byKind[r.Kind], &mcpreadyv1.Resource{Name: r.Name, TypeUrl: r.Kind.TypeURL(), Version: r.Version, Bundle: r.Bundle})
	}
	trustRes := byKind[artifact.KindTrustPolicy]
	if len(trustRes) == 0 {
		return len(f.Resources), nil
	}
	if err := c.Apply(artifact.KindTrustPolicy, trustRes, nil, true); err != nil {
		c.opts.Logger.Warn("sync: stored trust policy no longer verifies", "err", err)
		return len(f.Resources), nil
	}
	kinds := make([]artifact.Kind, 0, len(byKind))
	for k := range byKind {
		if k != artifact.KindTrustPolicy {
			kinds = append(kinds, k)
		}
	}
	sort.Slice(kinds, func(i, j int) bool { return kinds[i] < kinds[j] })
	for _, k := range kinds {
		for _, r := range byKind[k] {
			if err := c.Apply(k, []*mcpreadyv1.Resource{r}, nil, false); err != nil {
				c.opts.Logger.Warn("sync: dropping stored resource", "kind", k, "name", r.Name, "err", err)
				dropped++
				c.mu.Lock()
				delete(c.parked[k], r.Name)
				c.mu.Unlock()
			}
		}
	}
	c.mu.Lock()
	for k, v := range f.SotW {
		c.sotw[artifact.Kind(k)] = v
	}
	c.mu.Unlock()
	return dropped, nil
}
