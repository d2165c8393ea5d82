// Package demo is mcpready's demonstration: four small upstream MCP servers
// and the signed artifact set (trust policy, declarations, registry entries,
// evidence and a consumer policy) that makes a host agent route to them.
//
// It exists for `mcpready up`, `mcpready demo calls` and tests. It must not
// be used as production configuration: its keys are unencrypted demo keys
// and its servers hold toy data in memory.
package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Demo server names (the MCP server identities and artifact names).
const (
	ServerDocsA    = "com.example/docs-a"
	ServerDocsB    = "com.example/docs-b"
	ServerListings = "com.example/listings"
	ServerDocsUS   = "com.example/docs-us"
)

// Demo tool names.
const (
	ToolDocsLookup          = "docs_lookup"
	ToolUpdateListingStatus = "update_listing_status"
	ToolDeleteListing       = "delete_listing"
	ToolGetListing          = "get_listing"
)

// Regions used by the demo. The demo agent runs in RegionAgent; the Policy
// allows only that region, so ServerDocsUS (in RegionOther) is excluded.
const (
	RegionAgent = "eu-west"
	RegionOther = "us-east"
)

// FailTrigger in a docs_lookup query makes provider A (ServerDocsA) answer
// HTTP 503, so the agent falls back to provider B.
const FailTrigger = "fail-a"

// ServerVersion is the version every demo server reports.
const ServerVersion = "1.4.0"

// Upstream describes one running demo server.
type Upstream struct {
	Name    string
	Version string
	Region  string
	// URL is the Streamable HTTP endpoint, http://127.0.0.1:PORT/mcp.
	URL string
	// Owner is the provider that declares the server.
	Owner string
}

// LookupInput is docs_lookup's input.
type LookupInput struct {
	Query string `json:"query" jsonschema:"what to look up in the documentation"`
}

// LookupResult is docs_lookup's structured output.
type LookupResult struct {
	Title    string `json:"title" jsonschema:"title of the best matching page"`
	URL      string `json:"url" jsonschema:"address of the page"`
	Snippet  string `json:"snippet" jsonschema:"short excerpt of the page"`
	Provider string `json:"provider" jsonschema:"server that answered"`
}

// UpdateStatusInput is update_listing_status's input.
type UpdateStatusInput struct {
	ListingID string `json:"listing_id" jsonschema:"listing to change, e.g. L-100"`
	Status    string `json:"status" jsonschema:"new status: active, paused or sold"`
}

// ListingResult is the structured output of the listings tools.
type ListingResult struct {
	ListingID      string `json:"listing_id"`
	Status         string `json:"status"`
	PreviousStatus string `json:"previous_status,omitempty"`
	Deleted        bool   `json:"deleted,omitempty"`
}

// ListingInput names one listing.
type ListingInput struct {
	ListingID string `json:"listing_id" jsonschema:"listing id, e.g. L-100"`
}

var (
	errUnknownListing = errors.New("unknown listing")
	errBadStatus      = errors.New("status must be active, paused or sold")
)

type docPage struct{ title, path, text string }

var docPages = []docPage{
	{"Installing mcpready", "/install", "Run `go run ./cmd/mcpready up` to start the control plane, one host agent and demo servers on loopback."},
	{"Equivalence classes", "/concepts/equivalence", "An equivalence class is a consumer-approved set of tools that serve one capability; fallback only happens inside a class."},
	{"Receipts", "/concepts/receipts", "Every decision and call ends in a signed, redacted, hash-chained receipt that compliance teams verify offline."},
	{"Residency", "/concepts/residency", "Residency rules restrict which regions may serve a call; servers elsewhere are rejected with the reason recorded."},
	{"Human approval", "/concepts/approval", "State-changing tools may require human approval, asked through MCP elicitation, and are never retried automatically."},
}

func lookup(host, provider, query string) LookupResult {
	q := strings.ToLower(query)
	best, score := docPages[0], -1
	for _, p := range docPages {
		s := 0
		for _, w := range strings.Fields(q) {
			if strings.Contains(strings.ToLower(p.title+" "+p.text), w) {
				s++
			}
		}
		if s > score {
			best, score = p, s
		}
	}
	return LookupResult{Title: best.title, URL: "https://" + host + best.path, Snippet: best.text, Provider: provider}
}

// listings is the listings server's in-memory state.
type listings struct {
	mu     sync.Mutex
	status map[string]string
}

func newListings() *listings {
	return &listings{status: map[string]string{"L-100": "active", "L-200": "paused", "L-300": "active"}}
}

func (l *listings) update(id, status string) (ListingResult, error) {
	switch status {
	case "active", "paused", "sold":
	default:
		return ListingResult{}, errBadStatus
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	prev, ok := l.status[id]
	if !ok {
		return ListingResult{}, fmt.Errorf("%w %q", errUnknownListing, id)
	}
	l.status[id] = status
	return ListingResult{ListingID: id, Status: status, PreviousStatus: prev}, nil
}

func (l *listings) get(id string) (ListingResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.status[id]
	if !ok {
		return ListingResult{}, fmt.Errorf("%w %q", errUnknownListing, id)
	}
	return ListingResult{ListingID: id, Status: s}, nil
}

func (l *listings) delete(id string) (ListingResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.status[id]
	if !ok {
		return ListingResult{}, fmt.Errorf("%w %q", errUnknownListing, id)
	}
	delete(l.status, id)
	return ListingResult{ListingID: id, Status: s, Deleted: true}, nil
}

func boolPtr(b bool) *bool { return &b }

// counter counts tool calls per tool on one server.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) inc(tool string) {
	c.mu.Lock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[tool]++
	c.mu.Unlock()
}

func (c *counter) get(tool string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[tool]
}

func counted[In, Out any](c *counter, name string, h mcp.ToolHandlerFor[In, Out]) mcp.ToolHandlerFor[In, Out] {
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		c.inc(name)
		return h(ctx, req, in)
	}
}

// newDocsServer builds a docs provider exposing docs_lookup.
func newDocsServer(name, host, description string, c *counter) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: ServerVersion}, nil)
	mcp.AddTool(s, &mcp.Tool{
		Name:        ToolDocsLookup,
		Description: description,
		Annotations: &mcp.ToolAnnotations{Title: "Documentation lookup", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: boolPtr(false)},
	}, counted(c, ToolDocsLookup, func(_ context.Context, _ *mcp.CallToolRequest, in LookupInput) (*mcp.CallToolResult, LookupResult, error) {
		return nil, lookup(host, name, in.Query), nil
	}))
	// The pages as resources, which the demo Policy lets read (DocsPages),
	// and an internal draft it does not.
	for _, p := range docPages {
		addDocResource(s, "docs://"+host+"/pages"+p.path, p.title, p.text)
	}
	addDocResource(s, "docs://"+host+"/internal/roadmap", "Roadmap (internal draft)", "Unreleased plans, not for AI agents.")
	return s
}

// DocsPages is the resource pattern of the docs servers' published pages
// (the demo Policy's method rule); their internal drafts are outside it.
const DocsPages = "docs://*/pages/*"

func addDocResource(s *mcp.Server, uri, title, text string) {
	s.AddResource(&mcp.Resource{URI: uri, Name: title, MIMEType: "text/plain"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "text/plain", Text: text}}}, nil
		})
}

// newListingsServer builds the listings server with one state-changing, one
// destructive and one read-only tool.
func newListingsServer(l *listings, c *counter) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: ServerListings, Version: ServerVersion}, nil)
	mcp.AddTool(s, &mcp.Tool{
		Name:        ToolUpdateListingStatus,
		Description: "Change the status of one property listing (active, paused or sold).",
		Annotations: &mcp.ToolAnnotations{Title: "Update listing status", DestructiveHint: boolPtr(false), OpenWorldHint: boolPtr(false)},
	}, counted(c, ToolUpdateListingStatus, func(_ context.Context, _ *mcp.CallToolRequest, in UpdateStatusInput) (*mcp.CallToolResult, ListingResult, error) {
		r, err := l.update(in.ListingID, in.Status)
		return nil, r, err
	}))
	mcp.AddTool(s, &mcp.Tool{
		Name:        ToolDeleteListing,
		Description: "Delete one property listing permanently.",
		Annotations: &mcp.ToolAnnotations{Title: "Delete listing", DestructiveHint: boolPtr(true), OpenWorldHint: boolPtr(false)},
	}, counted(c, ToolDeleteListing, func(_ context.Context, _ *mcp.CallToolRequest, in ListingInput) (*mcp.CallToolResult, ListingResult, error) {
		r, err := l.delete(in.ListingID)
		return nil, r, err
	}))
	mcp.AddTool(s, &mcp.Tool{
		Name:        ToolGetListing,
		Description: "Read the current status of one property listing.",
		Annotations: &mcp.ToolAnnotations{Title: "Get listing", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: boolPtr(false)},
	}, counted(c, ToolGetListing, func(_ context.Context, _ *mcp.CallToolRequest, in ListingInput) (*mcp.CallToolResult, ListingResult, error) {
		r, err := l.get(in.ListingID)
		return nil, r, err
	}))
	return s
}

// maxPeek bounds how much of a request body the failure switch inspects.
const maxPeek = 1 << 20

// failSwitch answers 503 for tools/call requests while failing is set or when
// the request body contains FailTrigger; everything else passes through.
type failSwitch struct {
	next    http.Handler
	failing atomic.Bool
	refused atomic.Int64
}

func (f *failSwitch) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxPeek+1))
		r.Body.Close()
		if err != nil {
			http.Error(w, "reading request: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		isCall := bytes.Contains(body, []byte(`"tools/call"`))
		if isCall && (f.failing.Load() || bytes.Contains(body, []byte(FailTrigger))) {
			f.refused.Add(1)
			http.Error(w, "provider A is unavailable (demo failure)", http.StatusServiceUnavailable)
			return
		}
	}
	f.next.ServeHTTP(w, r)
}

type running struct {
	up      Upstream
	srv     *http.Server
	ln      net.Listener
	calls   *counter
	failure *failSwitch // nil unless the server can be made to fail
}

// Servers is the set of running demo upstream servers.
type Servers struct {
	byName map[string]*running
	wg     sync.WaitGroup
}

// ServersOptions configures StartServers. The zero value starts every server
// on 127.0.0.1 with a random port.
type ServersOptions struct {
	// Ports maps a server name to the loopback port to listen on. A missing
	// or zero entry means a random free port.
	Ports map[string]int
}

// StartServers starts the four demo servers on loopback, each serving
// Streamable HTTP at /mcp. Close stops them.
func StartServers(opts ServersOptions) (*Servers, error) {
	s := &Servers{byName: map[string]*running{}}
	l := newListings()
	type spec struct {
		up      Upstream
		build   func(*counter) *mcp.Server
		failure bool
	}
	specs := []spec{
		{Upstream{Name: ServerDocsA, Region: RegionAgent, Owner: "provider-a"}, func(c *counter) *mcp.Server {
			return newDocsServer(ServerDocsA, "docs-a.example", "Look up a topic in the product documentation (provider A).", c)
		}, true},
		{Upstream{Name: ServerDocsB, Region: RegionAgent, Owner: "provider-b"}, func(c *counter) *mcp.Server {
			return newDocsServer(ServerDocsB, "docs-b.example", "Look up a topic in the product documentation (provider B).", c)
		}, false},
		{Upstream{Name: ServerListings, Region: RegionAgent, Owner: "example-org"}, func(c *counter) *mcp.Server {
			return newListingsServer(l, c)
		}, false},
		{Upstream{Name: ServerDocsUS, Region: RegionOther, Owner: "example-org"}, func(c *counter) *mcp.Server {
			return newDocsServer(ServerDocsUS, "docs-us.example", "Look up a topic in the product documentation (US mirror).", c)
		}, false},
	}
	for _, sp := range specs {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", opts.Ports[sp.up.Name]))
		if err != nil {
			s.Close(context.Background())
			return nil, fmt.Errorf("demo: listen for %s: %w", sp.up.Name, err)
		}
		c := &counter{}
		ms := sp.build(c)
		var h http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ms }, nil)
		r := &running{up: sp.up, ln: ln, calls: c}
		if sp.failure {
			r.failure = &failSwitch{next: h}
			h = r.failure
		}
		mux := http.NewServeMux()
		mux.Handle("/mcp", h)
		r.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		r.up.Version = ServerVersion
		r.up.URL = "http://" + ln.Addr().String() + "/mcp"
		s.byName[sp.up.Name] = r
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			_ = r.srv.Serve(ln) // returns http.ErrServerClosed after Close
		}()
	}
	return s, nil
}

// Upstreams lists the running servers, sorted by name.
func (s *Servers) Upstreams() []Upstream {
	out := make([]Upstream, 0, len(s.byName))
	for _, r := range s.byName {
		out = append(out, r.up)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// URL returns the endpoint of the named server, or "" if there is none.
func (s *Servers) URL(name string) string {
	if r, ok := s.byName[name]; ok {
		return r.up.URL
	}
	return ""
}

// ErrNoFailure is returned by SetFailing for a server that cannot be told
// to fail.
var ErrNoFailure = errors.New("demo: server has no failure switch")

// SetFailing makes every tools/call to the named server (only ServerDocsA
// supports it) answer HTTP 503 until it is unset.
func (s *Servers) SetFailing(name string, failing bool) error {
	r, ok := s.byName[name]
	if !ok || r.failure == nil {
		return fmt.Errorf("%w: %s", ErrNoFailure, name)
	}
	r.failure.failing.Store(failing)
	return nil
}

// Calls reports how many times the named server's tool handler ran.
// Calls refused by the failure switch never reach the handler.
func (s *Servers) Calls(server, tool string) int {
	if r, ok := s.byName[server]; ok {
		return r.calls.get(tool)
	}
	return 0
}

// Refused reports how many tools/call requests the failure switch of the
// named server answered with HTTP 503.
func (s *Servers) Refused(server string) int64 {
	if r, ok := s.byName[server]; ok && r.failure != nil {
		return r.failure.refused.Load()
	}
	return 0
}

// Close stops every server, waiting for in-flight requests until ctx ends.
func (s *Servers) Close(ctx context.Context) error {
	var errs []error
	for _, r := range s.byName {
		if err := r.srv.Shutdown(ctx); err != nil {
			r.srv.Close()
			errs = append(errs, err)
		}
	}
	s.wg.Wait()
	return errors.Join(errs...)
}
