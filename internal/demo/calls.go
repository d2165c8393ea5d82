package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// CallsOptions configures RunCalls.
type CallsOptions struct {
	// AgentURL is the agent's aggregate MCP endpoint, e.g.
	// http://127.0.0.1:7480/mcp. Exact-server views are AgentURL+"/servers/<name>".
	AgentURL string
	// Deny answers approval requests with "decline" instead of "accept".
	Deny bool
	// Token, when set, is sent as a bearer token; empty uses the agent's
	// default principal.
	Token string
	// Out receives a human-readable account of each call; nil discards it.
	Out io.Writer
}

// Call is the outcome of one demo call.
type Call struct {
	// Title says what the call shows.
	Title string
	// Endpoint and Tool are where and what was called.
	Endpoint, Tool string
	// ToolError is true when the agent answered with isError (a refusal or a
	// failure it reports as a recoverable tool error).
	ToolError bool
	// Text is the result's text content; Structured its structured content.
	Text       string
	Structured map[string]any
	// ApprovalAsked is true when the agent asked for human approval.
	ApprovalAsked bool
	// Err is a protocol or transport error (the call did not complete).
	Err error
}

// SessionProtocolVersion is the MCP version the demo client asks for: the
// session era, in which the agent can ask the client for approval.
const SessionProtocolVersion = "2025-11-25"

// ErrToolMissing is returned when the agent does not list a tool the demo
// needs, for instance before the configuration reached it.
var ErrToolMissing = errors.New("demo: tool not listed by the agent")

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// session connects one go-sdk client session to url; approvals are
// answered per opts and recorded in *asked.
func session(ctx context.Context, url string, opts CallsOptions, asked *bool) (*mcp.ClientSession, error) {
	copts := &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			*asked = true
			action := "accept"
			if opts.Deny {
				action = "decline"
			}
			if opts.Out != nil {
				fmt.Fprintf(opts.Out, "   approval requested: %q -> %s (answered by the demo; --deny declines)\n", req.Params.Message, action)
			}
			if opts.Deny {
				return &mcp.ElicitResult{Action: action}, nil
			}
			return &mcp.ElicitResult{Action: action, Content: approvalContent(req.Params.RequestedSchema)}, nil
		},
	}
	tr := &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}
	if opts.Token != "" {
		tr.HTTPClient = &http.Client{Transport: bearer{opts.Token, http.DefaultTransport}}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "mcpready-demo-calls", Version: ServerVersion}, copts)
	// Human approval is asked with elicitation, a server-to-client request
	// that needs a session: use the 2025-11-25 era.
	return c.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: SessionProtocolVersion})
}

// approvalContent fills an approval form: booleans true, enums their
// approving value (else the first), other strings a note.
func approvalContent(schema any) map[string]any {
	m, _ := schema.(map[string]any)
	props, _ := m["properties"].(map[string]any)
	out := map[string]any{}
	for name, p := range props {
		ps, _ := p.(map[string]any)
		switch ps["type"] {
		case "boolean":
			out[name] = true
		case "string":
			if enum, ok := ps["enum"].([]any); ok && len(enum) > 0 {
				out[name] = enum[0]
				for _, e := range enum {
					if s, ok := e.(string); ok && (strings.HasPrefix(s, "approve") || s == "yes") {
						out[name] = s
					}
				}
			} else {
				out[name] = "approved by mcpready demo"
			}
		}
	}
	return out
}

// findTool returns the listed tool named want, or the one whose name ends
// with "__"+want (the agent's namespaced form "<server>__<tool>").
func findTool(tools []*mcp.Tool, want string) string {
	var suffix string
	for _, t := range tools {
		if t.Name == want {
			return t.Name
		}
		if strings.HasSuffix(t.Name, "__"+want) {
			suffix = t.Name
		}
	}
	return suffix
}

// RunCalls drives the demo's calls through the agent with the go-sdk MCP
// client and describes each on opts.Out:
//  1. docs_lookup through the docs_lookup equivalence class;
//  2. docs_lookup while provider A fails: the agent falls back to provider B;
//  3. update_listing_status: state-changing, asks for human approval, never retried;
//  4. delete_listing: forbidden for the default principal, refused with the reason;
//  5. docs_lookup on the us-east server directly: excluded by residency.
//
// It returns every call; an error means the demo could not run at all
// (agent unreachable, or the tools not listed yet).
func RunCalls(ctx context.Context, opts CallsOptions) ([]Call, error) {
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	var asked bool
	cs, err := session(ctx, opts.AgentURL, opts, &asked)
	if err != nil {
		return nil, fmt.Errorf("demo: connect to the agent at %s: %w", opts.AgentURL, err)
	}
	defer cs.Close()
	var tools []*mcp.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("demo: list tools: %w", err)
		}
		tools = append(tools, t)
	}
	fmt.Fprintf(out, "Tools listed by %s:\n", opts.AgentURL)
	for _, t := range tools {
		fmt.Fprintf(out, "  %s\n", t.Name)
	}
	lookup := findTool(tools, CapabilityDocsLookup)
	update := findTool(tools, ToolUpdateListingStatus)
	if lookup == "" || update == "" {
		return nil, fmt.Errorf("%w: want %s and %s", ErrToolMissing, CapabilityDocsLookup, ToolUpdateListingStatus)
	}
	var calls []Call
	run := func(s *mcp.ClientSession, title, endpoint, tool string, args map[string]any) {
		asked = false
		c := Call{Title: title, Endpoint: endpoint, Tool: tool}
		fmt.Fprintf(out, "\n%d. %s\n   call %s at %s\n", len(calls)+1, title, tool, endpoint)
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		res, err := s.CallTool(cctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		cancel()
		c.ApprovalAsked = asked
		if err != nil {
			c.Err = err
		} else {
			c.ToolError = res.IsError
			var texts []string
			for _, ct := range res.Content {
				if tc, ok := ct.(*mcp.TextContent); ok {
					texts = append(texts, tc.Text)
				}
			}
			c.Text = strings.Join(texts, "\n")
			if res.StructuredContent != nil {
				b, _ := json.Marshal(res.StructuredContent)
				_ = json.Unmarshal(b, &c.Structured)
			}
		}
		calls = append(calls, c)
		describe(out, c)
	}

	run(cs, "read-only capability through its equivalence class", opts.AgentURL, lookup, map[string]any{"query": "how are receipts signed"})
	run(cs, "provider A fails: fallback inside the approved class", opts.AgentURL, lookup, map[string]any{"query": "receipts " + FailTrigger})
	run(cs, "state-changing tool: human approval, never retried", opts.AgentURL, update, map[string]any{"listing_id": "L-100", "status": "paused"})
	// The next two use the transparent view of one server, where tools keep
	// their original names (and the forbidden one is not even listed).
	for _, c := range []struct {
		title, server, tool string
		args                map[string]any
	}{
		{"tool this principal may not call: refused with the reason", ServerListings, ToolDeleteListing, map[string]any{"listing_id": "L-200"}},
		{"server in another region: excluded by residency", ServerDocsUS, ToolDocsLookup, map[string]any{"query": "residency"}},
	} {
		u := strings.TrimSuffix(opts.AgentURL, "/") + "/servers/" + c.server
		s, err := session(ctx, u, opts, &asked)
		if err != nil {
			calls = append(calls, Call{Title: c.title, Endpoint: u, Tool: c.tool, Err: err})
			fmt.Fprintf(out, "\n%d. %s\n   connect %s\n", len(calls), c.title, u)
			describe(out, calls[len(calls)-1])
			continue
		}
		run(s, c.title, u, c.tool, c.args)
		s.Close()
	}
	return calls, nil
}

// describe prints the outcome of one call.
func describe(out io.Writer, c Call) {
	switch {
	case c.Err != nil:
		fmt.Fprintf(out, "   error: %v\n", c.Err)
	case c.ToolError:
		fmt.Fprintf(out, "   refused/failed (tool error): %s\n", oneLine(c.Text))
	default:
		if p, ok := c.Structured["provider"]; ok {
			fmt.Fprintf(out, "   answered by %v: %v\n", p, c.Structured["title"])
		} else {
			fmt.Fprintf(out, "   result: %s\n", oneLine(c.Text))
		}
	}
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
