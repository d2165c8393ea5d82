package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/mcpready/mcpready/agent/pin"
	"github.com/mcpready/mcpready/agent/upstream"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// The two protocol eras the probe tries, each on its own.
const (
	VersionStateless = "2026-07-28" // server/discover
	VersionSession   = "2025-11-25" // initialize
)

func (p *run) connect(ctx context.Context, version string) (*mcp.ClientSession, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, p.o.StepTimeout)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "mcpready-probe", Version: "1"}, nil)
	t := &mcp.StreamableClientTransport{Endpoint: p.u.String(), HTTPClient: p.httpClient(), MaxRetries: -1, DisableStandaloneSSE: true}
	start := time.Now()
	cs, err := c.Connect(ctx, t, &mcp.ClientSessionOptions{ProtocolVersion: version})
	return cs, time.Since(start), err
}

// protocol tries both eras separately and returns an open session of the
// newest era that worked.
func (p *run) protocol(ctx context.Context) *mcp.ClientSession {
	var best *mcp.ClientSession
	for _, v := range []string{VersionStateless, VersionSession} {
		era := Era{Requested: v}
		cs, took, err := p.connect(ctx, v)
		switch {
		case err != nil:
			era.Reason = netReason(err, "handshake-failed")
		case v == VersionStateless && cs.InitializeResult().ProtocolVersion < VersionStateless:
			// The SDK fell back to initialize: server/discover is not served.
			era.Reason = "discover-unsupported"
			cs.Close()
		default:
			era.OK, era.Negotiated = true, cs.InitializeResult().ProtocolVersion
			if best == nil {
				best, p.r.Cold = cs, took
			} else {
				cs.Close()
			}
		}
		p.r.Eras = append(p.r.Eras, era)
	}
	if best == nil {
		p.add(LayerProtocol, NotReady, "no-era", "neither server/discover (2026-07-28) nor initialize (2025-11-25) worked")
		return nil
	}
	if si := best.InitializeResult().ServerInfo; si != nil {
		p.r.ServerVersion = si.Version
	}
	p.r.ProtocolVersion = best.InitializeResult().ProtocolVersion
	p.add(LayerProtocol, Ready, "", "negotiated "+best.InitializeResult().ProtocolVersion)
	return best
}

// listing reads every page of tools/list, up to MaxPages. A page limit, a
// repeated cursor or a failing page leaves the listing partial, which is
// not ready: tools past it are unknown.
func (p *run) listing(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.Tool, bool) {
	ctx, cancel := context.WithTimeout(ctx, p.o.StepTimeout)
	defer cancel()
	var tools []*mcp.Tool
	seen := map[string]bool{}
	cursor := ""
	for {
		if p.r.Pages >= p.o.MaxPages {
			return p.partial(tools, "page-limit", fmt.Sprintf("stopped after %d pages", p.r.Pages))
		}
		res, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			if p.r.Pages == 0 {
				p.add(LayerListing, NotReady, netReason(err, "list-failed"), "tools/list failed")
				return nil, false
			}
			return p.partial(tools, "page-failed", fmt.Sprintf("page %d failed", p.r.Pages+1))
		}
		p.r.Pages++
		tools = append(tools, res.Tools...)
		p.r.Tools = len(tools)
		if res.NextCursor == "" {
			break
		}
		if seen[res.NextCursor] {
			return p.partial(tools, "cursor-loop", "the server repeated a cursor")
		}
		seen[res.NextCursor] = true
		cursor = res.NextCursor
	}
	if len(tools) == 0 {
		p.add(LayerListing, Ready, "empty", "the server lists no tools")
		return tools, true
	}
	p.add(LayerListing, Ready, "", fmt.Sprintf("%d tools on %d pages", len(tools), p.r.Pages))
	return tools, true
}

func (p *run) partial(tools []*mcp.Tool, reason, detail string) ([]*mcp.Tool, bool) {
	p.r.Partial = true
	p.r.Tools = len(tools)
	p.add(LayerListing, NotReady, "partial-"+reason, detail)
	return nil, false
}

// invoke calls one tool the consumer classifies read-only, with the
// consumer's arguments or else arguments valid against its input schema,
// and checks the result.
func (p *run) invoke(ctx context.Context, cs *mcp.ClientSession, tools []*mcp.Tool) {
	var t *mcp.Tool
	for _, x := range tools {
		if slices.Contains(p.o.ReadOnly, x.Name) {
			t = x
			break
		}
	}
	if t == nil {
		p.add(LayerInvocation, Skipped, "no-read-only-tool", "no listed tool is classified read-only by the consumer")
		p.add(LayerResult, Skipped, "not-invoked", "")
		return
	}
	p.r.ProbedTool, p.r.RegistryRecordVersion = t.Name, p.o.RecordVersions[t.Name]
	if id, pt, ok := p.observed(t); ok {
		p.r.InputSchemaDigest, p.r.OutputSchemaDigest = id.GetInputSchemaDigest(), id.GetOutputSchemaDigest()
		p.pinned = &mcpreadyv1.RegistryEntry{Identity: id, SideEffect: pin.SideEffectOf(pt.Annotations), Idempotency: pin.IdempotencyOf(pt.Annotations)}
	}
	ctx, cancel := context.WithTimeout(ctx, p.o.StepTimeout)
	defer cancel()
	args := p.o.Arguments
	if args == nil {
		args = ExampleArguments(SchemaObject(t.InputSchema))
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: t.Name, Arguments: args})
	if err != nil {
		var je *jsonrpc.Error
		if errors.As(err, &je) && je.Code == jsonrpc.CodeInvalidParams {
			p.add(LayerInvocation, NotReady, "arguments-rejected", "schema-valid arguments were rejected (invocation-not-ready, not unavailability)")
		} else {
			p.add(LayerInvocation, NotReady, netReason(err, "call-failed"), "tools/call failed")
		}
		p.add(LayerResult, NotReached, "", "")
		return
	}
	p.add(LayerInvocation, Ready, "", "")
	p.result(t, res)
}

func (p *run) result(t *mcp.Tool, res *mcp.CallToolResult) {
	if res.IsError {
		p.add(LayerResult, NotReady, "is-error", "a tool-execution failure inside a protocol success")
		return
	}
	if t.OutputSchema == nil {
		p.add(LayerResult, Ready, "", "no output schema declared")
		return
	}
	if res.StructuredContent == nil {
		p.add(LayerResult, NotReady, "no-structured-content", "the tool declares an output schema but returned no structured content")
		return
	}
	if err := validateOutput(t.OutputSchema, res.StructuredContent); err != nil {
		p.add(LayerResult, NotReady, "output-schema", "the structured content does not match the output schema")
		return
	}
	p.add(LayerResult, Ready, "", "matches the output schema")
}

func validateOutput(schema, value any) error {
	sb, err := json.Marshal(schema)
	if err != nil {
		return err
	}
	vb, err := json.Marshal(value)
	if err != nil {
		return err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(sb))
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(vb))
	if err != nil {
		return err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("output.json", doc); err != nil {
		return err
	}
	s, err := c.Compile("output.json")
	if err != nil {
		return err
	}
	return s.Validate(inst)
}

// observed is t as agents pin it, served by the probed server now; false
// when its definition cannot be digested.
func (p *run) observed(t *mcp.Tool) (*mcpreadyv1.ToolIdentity, pin.Tool, bool) {
	pt, err := upstream.PinTool(t)
	if err != nil {
		return nil, pin.Tool{}, false
	}
	id, err := pin.Observed(p.r.Server, p.r.ServerVersion, p.r.URL, p.r.ProtocolVersion, pt)
	return id, pt, err == nil
}

// warm times WarmCalls first-page listings on the open session; Warm is
// their median. A listing that shows the probed tool defined otherwise than
// before is drift observed (Report.DriftObserved).
func (p *run) warm(ctx context.Context, cs *mcp.ClientSession) {
	var ds []time.Duration
	for range p.o.WarmCalls {
		cctx, cancel := context.WithTimeout(ctx, p.o.StepTimeout)
		start := time.Now()
		res, err := cs.ListTools(cctx, nil)
		cancel()
		if err != nil {
			return
		}
		ds = append(ds, time.Since(start))
		p.drift(res.Tools)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	p.r.Warm = ds[len(ds)/2]
}

// drift adds to Report.DriftObserved what tools shows changed in the
// probed tool since it was first listed, as an agent's pin would name it
// (pin.Compare; nothing when the tool is not among them).
func (p *run) drift(tools []*mcp.Tool) {
	if p.pinned == nil {
		return
	}
	for _, t := range tools {
		if t.Name != p.r.ProbedTool {
			continue
		}
		id, pt, ok := p.observed(t)
		if !ok {
			return
		}
		for _, l := range pin.Compare(p.pinned, pin.Live{Identity: id, Tool: pt}) {
			if n := readiness.DriftName(l); !slices.Contains(p.r.DriftObserved, n) {
				p.r.DriftObserved = append(p.r.DriftObserved, n)
			}
		}
		return
	}
}

// SchemaObject returns a JSON Schema given as any Go value (a map, a
// *jsonschema.Schema, raw JSON) as a generic map; nil when it is not an
// object.
func SchemaObject(v any) map[string]any {
	if m, ok := v.(map[string]any); ok {
		return m
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}
