package front

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/pin"
	"github.com/mcpready/mcpready/agent/upstream"
	"github.com/mcpready/mcpready/agent/validate"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// pins compares every tool definition an upstream lists with the pinned
// identity of its registry entries, blocks drifted entries on this host at
// once, reports the drift, and pins output schemas for result validation.
type pins struct {
	f     *Front
	block *pin.Blocklist

	mu       sync.Mutex
	listed   map[upstream.Target]map[string]*mcp.Tool // target -> tool name -> definition (current state only)
	against  map[string]string                        // blocked entry -> definition digest it was pinned to
	tainted  map[string]string                        // entry -> tripwire rule hit by its description
	reported map[string]bool                          // entry+observed digest+labels already reported
}

func newPins(f *Front) *pins {
	return &pins{f: f, block: &pin.Blocklist{}, listed: map[upstream.Target]map[string]*mcp.Tool{},
		against: map[string]string{}, tainted: map[string]string{}, reported: map[string]bool{}}
}

// reset forgets listings (schemas are pinned again under the new state) and
// lifts blocks whose entry now pins a different definition.
func (p *pins) reset(st *State) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.listed = map[upstream.Target]map[string]*mcp.Tool{}
	for entry, digest := range p.against {
		if e := st.Entries[entry]; e == nil || e.GetIdentity().GetDefinitionDigest() != digest {
			p.block.Unblock(entry)
			delete(p.against, entry)
		}
	}
	p.tainted = map[string]string{}
}

// Drifted implements decide.DriftGuard.
func (p *pins) Drifted(entry string) bool {
	if p.block.Drifted(entry) {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_, bad := p.tainted[entry]
	return bad
}

// observe checks a fresh listing of tools, as served by session up,
// against the entries pinned at up's endpoint (entries of the same server
// at another endpoint are checked against that endpoint's own listing).
func (p *pins) observe(st *State, up *upstream.Session, tools []*mcp.Tool) {
	byName := make(map[string]*mcp.Tool, len(tools))
	server, endpoint := up.Server, up.Endpoint()
	for _, t := range tools {
		byName[t.Name] = t
		var entries []string
		for _, name := range st.byTool[server][t.Name] {
			if p.f.target(server, st.Entries[name].GetIdentity().GetEndpoint()) == up.Target {
				entries = append(entries, name)
			}
		}
		if len(entries) == 0 {
			continue
		}
		pt, err := upstream.PinTool(t)
		var observed *mcpreadyv1.ToolIdentity
		if err == nil {
			observed, err = pin.Observed(server, up.ServerVersion(), endpoint, up.ProtocolVersion(), pt)
		}
		hit, poisoned := scanTool(t)
		for _, name := range entries {
			e := st.Entries[name]
			var labels []mcpreadyv1.DriftLabel
			if err != nil {
				labels = []mcpreadyv1.DriftLabel{mcpreadyv1.DriftLabel_DRIFT_LABEL_DEFINITION_DRIFT}
				observed = &mcpreadyv1.ToolIdentity{ServerName: server, ToolName: t.Name}
			} else {
				labels = pin.Compare(e, live(st, server, observed, pt))
			}
			p.mu.Lock()
			if poisoned {
				p.tainted[name] = hit.Rule
			}
			if len(labels) > 0 {
				p.block.Block(name, labels)
				p.against[name] = e.GetIdentity().GetDefinitionDigest()
				key := fmt.Sprint(name, "|", observed.GetDefinitionDigest(), "|", labels) // a new kind of drift is news too
				first := !p.reported[key]
				p.reported[key] = true
				p.mu.Unlock()
				p.f.opts.Logger.Warn("tool definition drifted; blocked on this host", "entry", name, "labels", labels)
				if first {
					go p.report(name, labels, observed)
				}
				continue
			}
			p.mu.Unlock()
			if d := e.GetIdentity().GetOutputSchemaDigest(); d != "" && len(pt.OutputSchema) > 0 && !st.Checker.Pinned(d) {
				if err := st.Checker.Pin(d, pt.OutputSchema); err != nil {
					p.f.opts.Logger.Warn("pinning output schema", "entry", name, "err", err)
				}
			}
		}
	}
	p.mu.Lock()
	if p.f.state.Load() == st {
		p.listed[up.Target] = byName
	}
	p.mu.Unlock()
}

// live is a listed tool as pin.Compare sees it: its identity and
// definition, and the permissions, data access and endpoint its server's
// Declaration states.
func live(st *State, server string, observed *mcpreadyv1.ToolIdentity, t pin.Tool) pin.Live {
	return pin.Live{Identity: observed, Tool: t}.Declared(st.decls[server])
}

func (p *pins) report(entry string, labels []mcpreadyv1.DriftLabel, observed *mcpreadyv1.ToolIdentity) {
	if p.f.opts.ReportDrift == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := &mcpreadyv1.ReportDriftRequest{
		Node:      &mcpreadyv1.Node{Id: p.f.opts.NodeID},
		EntryName: entry,
		Labels:    labels,
		Observed:  observed,
		Detail:    "observed by host agent at tools/list",
	}
	if err := p.f.opts.ReportDrift(ctx, req); err != nil {
		p.f.opts.Logger.Warn("reporting drift", "entry", entry, "err", err)
	}
}

// tools returns the tools listed at t, listing them (and checking pins) on
// the shared session when this state has not seen them yet.
func (p *pins) tools(ctx context.Context, st *State, t upstream.Target) (map[string]*mcp.Tool, error) {
	p.mu.Lock()
	m, ok := p.listed[t]
	p.mu.Unlock()
	if ok {
		return m, nil
	}
	up, err := p.f.pool.Shared(ctx, t)
	if err != nil {
		return nil, err
	}
	list, err := p.f.listAll(ctx, up)
	if err != nil {
		return nil, err
	}
	p.observe(st, up, list)
	p.mu.Lock()
	defer p.mu.Unlock()
	if m, ok := p.listed[t]; ok {
		return m, nil
	}
	return toolMap(list), nil
}

// maxListPages bounds how many pages of one tools/list the agent follows.
const maxListPages = 100

// listAll lists every tool of up, following each page's cursor up to
// maxListPages pages. Past the bound it keeps what it read, logs and
// counts the partial coverage: tools on later pages are neither shown nor
// pinned.
func (f *Front) listAll(ctx context.Context, up *upstream.Session) ([]*mcp.Tool, error) {
	var tools []*mcp.Tool
	err := up.Do(ctx, func(ctx context.Context, cs *mcp.ClientSession) error {
		tools = tools[:0]
		cursor := ""
		for range maxListPages {
			res, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
			if err != nil {
				return err
			}
			tools = append(tools, res.Tools...)
			if cursor = res.NextCursor; cursor == "" {
				return nil
			}
		}
		f.metrics.partialLists.WithLabelValues(up.Server).Inc()
		f.opts.Logger.Warn("tools/list has more pages than the agent follows; later tools are not listed or pinned",
			"server", up.Server, "endpoint", up.Endpoint(), "pages", maxListPages, "tools", len(tools))
		return nil
	})
	return tools, err
}

func toolMap(list []*mcp.Tool) map[string]*mcp.Tool {
	m := make(map[string]*mcp.Tool, len(list))
	for _, t := range list {
		m[t.Name] = t
	}
	return m
}

// toolsChanged re-lists t's tools at once (a rug pull is caught before
// the next call) and tells front sessions to re-list.
func (p *pins) toolsChanged(t upstream.Target) {
	p.mu.Lock()
	delete(p.listed, t)
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := p.tools(ctx, p.f.state.Load(), t); err != nil {
		p.f.opts.Logger.Warn("re-listing tools after list_changed", "server", t.Server, "endpoint", t.Endpoint, "err", err)
	}
	p.f.notifyToolsChanged(t.Server)
}

// relistEvery lists the tools of every upstream of the current state every
// interval until stop is closed, checking pins (an upstream may change a
// definition without notifying); front sessions are told to re-list when a
// listing changed.
func (p *pins) relistEvery(interval time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		st := p.f.state.Load()
		for server := range st.byTool {
			for _, tg := range p.f.targets(st, server) {
				p.relist(st, tg)
			}
		}
	}
}

// relist lists t again on its shared session and checks its pins.
func (p *pins) relist(st *State, t upstream.Target) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	up, err := p.f.pool.Shared(ctx, t)
	var list []*mcp.Tool
	if err == nil {
		list, err = p.f.listAll(ctx, up)
	}
	if err != nil {
		p.f.opts.Logger.Warn("periodic tools/list", "server", t.Server, "endpoint", t.Endpoint, "err", err)
		return
	}
	p.mu.Lock()
	before, seen := p.listed[t]
	p.mu.Unlock()
	p.observe(st, up, list)
	if seen && !sameTools(before, list) {
		p.f.notifyToolsChanged(t.Server)
	}
}

// sameTools reports whether list defines exactly the tools of m.
func sameTools(m map[string]*mcp.Tool, list []*mcp.Tool) bool {
	if len(m) != len(list) {
		return false
	}
	for _, t := range list {
		a, errA := json.Marshal(m[t.Name])
		b, errB := json.Marshal(t)
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			return false
		}
	}
	return true
}

// scanTool runs the injection tripwire over the text of t that clients
// hand to the model with it: its title and description, its annotations'
// title, and every "title" and "description" string in its input and
// output schemas.
func scanTool(t *mcp.Tool) (validate.Hit, bool) { return scanTexts(toolTexts(nil, t)) }

// toolTexts appends the model-facing texts of t (scanTool).
func toolTexts(out []string, t *mcp.Tool) []string {
	out = append(out, t.Title, t.Description)
	if t.Annotations != nil {
		out = append(out, t.Annotations.Title)
	}
	return schemaTexts(schemaTexts(out, t.InputSchema), t.OutputSchema)
}

// scanTexts is the first tripwire hit in texts.
func scanTexts(texts []string) (validate.Hit, bool) {
	for _, s := range texts {
		if hit, ok := validate.Scan(s); ok {
			return hit, true
		}
	}
	return validate.Hit{}, false
}

// schemaTexts appends the "title" and "description" strings anywhere in a
// JSON Schema as decoded from JSON (maps and slices).
func schemaTexts(out []string, v any) []string {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && (k == "title" || k == "description") {
				out = append(out, s)
				continue
			}
			out = schemaTexts(out, e)
		}
	case []any:
		for _, e := range x {
			out = schemaTexts(out, e)
		}
	}
	return out
}
