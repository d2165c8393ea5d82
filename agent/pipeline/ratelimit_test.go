package pipeline

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/internal/mcptest"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// limited is a real go-sdk server whose responses carry the RateLimit
// fields it is set to.
func limited(t *testing.T) (url string, field *atomic.Value) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "limited", Version: "1.0.0"}, nil)
	mcptest.AddDefaultTools(srv)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	field = &atomic.Value{}
	field.Store("")
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := field.Load().(string); v != "" {
			w.Header().Set("RateLimit", v)
			w.Header().Set("RateLimit-Policy", `"default";q=100;w=60`)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL + "/mcp", field
}

// A route whose upstream said its quota is spent (RateLimit r=0 with a
// reset) is ranked after the class's other routes until the reset, and a
// response with quota left restores it; the hint never refuses: with
// every route spent the call still runs on the first. Before, response
// hints were not read.
func TestRateLimitHintLowersRank(t *testing.T) {
	urlA, fieldA := limited(t)
	urlB, fieldB := limited(t)
	pl, st, _ := setup(t, policy(), map[string]*mcpreadyv1.RegistryEntry{"a": entry("a", urlA), "b": entry("b", urlB)})
	tr := newFake(t)
	var last *mcpreadyv1.Receipt
	serve := func() string {
		t.Helper()
		res := pl.Call(context.Background(), st, request("echo_any"), tr)
		if res.Answer == nil || res.Answer.IsError || res.Route == nil {
			t.Fatalf("call failed: %+v", res.Answer)
		}
		last = res.Receipt
		return res.Route.Entry
	}
	if got := serve(); got != "a" {
		t.Fatalf("first call on %s, want a (ranked first)", got)
	}
	fieldA.Store(`"default";r=0;t=60`)
	if got := serve(); got != "a" {
		t.Fatalf("call %s, want a: its hint arrives with this answer", got)
	}
	if got := serve(); got != "b" {
		t.Fatalf("after a said its quota is spent, the call went to %s, want b", got)
	}
	if acts := readiness.ActionStrings(last.GetActions()); !slices.Equal(acts, []string{"rate-limit-hint:a"}) {
		t.Fatalf("receipt actions %v, want the hint that moved a", acts)
	}
	fieldB.Store(`limit=100, remaining=0, reset=60`) // the older form
	if got := serve(); got != "b" {
		t.Fatalf("call %s, want b", got)
	}
	if got := serve(); got != "a" {
		t.Fatalf("with every route spent the call went to %s, want the first, a", got)
	}
	fieldA.Store(`"default";r=50;t=60`)
	serve()
	if got := serve(); got != "a" {
		t.Fatalf("after a reported quota left the call went to %s, want a", got)
	}
	fieldA.Store(`"default";r=garbage`) // malformed: ignored, a keeps its rank
	serve()
	if got := serve(); got != "a" {
		t.Fatalf("a malformed hint moved the call to %s", got)
	}
}

// The fields are looked up by their canonical keys, as Header.Get finds
// them whatever their case on the wire.
func TestRateLimitFieldKeys(t *testing.T) {
	for name, key := range map[string]string{"RateLimit": rateLimitField, "RateLimit-Policy": rateLimitPolicyField} {
		if c := http.CanonicalHeaderKey(name); c != key {
			t.Errorf("%s: key %q, canonical %q", name, key, c)
		}
		h := http.Header{key: {"a"}}
		if n := testing.AllocsPerRun(100, func() { _ = h.Get(key) }); n != 0 {
			t.Errorf("%s: Header.Get allocates %v times", name, n)
		}
	}
	// Over the wire, whatever the case the upstream writes.
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader("HTTP/1.1 200 OK\r\nratelimit: limit=10, remaining=0, reset=5\r\nRATELIMIT-POLICY: 10;w=60\r\nContent-Length: 0\r\n\r\n")), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Header.Get(rateLimitField) != "limit=10, remaining=0, reset=5" || resp.Header.Get(rateLimitPolicyField) != "10;w=60" {
		t.Fatalf("fields of %v not found", resp.Header)
	}
}
