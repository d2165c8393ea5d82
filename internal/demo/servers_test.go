package demo

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func startServers(t *testing.T) *Servers {
	t.Helper()
	s, err := StartServers(ServersOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		s.Close(ctx)
	})
	return s
}

func connect(t *testing.T, url string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "0"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
}

func TestServersListTools(t *testing.T) {
	s := startServers(t)
	want := map[string][]string{
		ServerDocsA:    {ToolDocsLookup},
		ServerDocsB:    {ToolDocsLookup},
		ServerDocsUS:   {ToolDocsLookup},
		ServerListings: {ToolDeleteListing, ToolGetListing, ToolUpdateListingStatus},
	}
	ups := s.Upstreams()
	if len(ups) != len(want) {
		t.Fatalf("got %d upstreams, want %d", len(ups), len(want))
	}
	for _, u := range ups {
		if !strings.HasPrefix(u.URL, "http://127.0.0.1:") || !strings.HasSuffix(u.URL, "/mcp") {
			t.Errorf("%s: URL %q is not a loopback /mcp endpoint", u.Name, u.URL)
		}
		ls, err := ListTools(context.Background(), u.URL)
		if err != nil {
			t.Fatal(err)
		}
		if ls.Name != u.Name || ls.Version != ServerVersion {
			t.Errorf("server info %s %s, want %s %s", ls.Name, ls.Version, u.Name, ServerVersion)
		}
		var names []string
		for _, tl := range ls.Tools {
			names = append(names, tl.Name)
			if tl.OutputSchema == nil {
				t.Errorf("%s/%s has no output schema", u.Name, tl.Name)
			}
			if tl.Annotations == nil {
				t.Errorf("%s/%s has no annotations", u.Name, tl.Name)
			}
			if tl.Name == ToolDocsLookup && !tl.Annotations.ReadOnlyHint {
				t.Errorf("%s/docs_lookup is not readOnlyHint", u.Name)
			}
		}
		if strings.Join(names, ",") != strings.Join(want[u.Name], ",") {
			t.Errorf("%s tools = %v, want %v", u.Name, names, want[u.Name])
		}
	}
}

func TestDocsLookupAndFailure(t *testing.T) {
	s := startServers(t)
	a := connect(t, s.URL(ServerDocsA))
	b := connect(t, s.URL(ServerDocsB))

	tests := []struct {
		name     string
		cs       *mcp.ClientSession
		query    string
		failing  bool
		wantErr  bool
		provider string
	}{
		{"provider A answers", a, "receipts", false, false, ServerDocsA},
		{"provider B answers", b, "residency", false, false, ServerDocsB},
		{"trigger fails A", a, "receipts " + FailTrigger, false, true, ""},
		{"trigger does not fail B", b, "receipts " + FailTrigger, false, false, ServerDocsB},
		{"switch fails A", a, "receipts", true, true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := s.SetFailing(ServerDocsA, tc.failing); err != nil {
				t.Fatal(err)
			}
			res, err := call(t, tc.cs, ToolDocsLookup, map[string]any{"query": tc.query})
			if tc.wantErr {
				if err == nil {
					t.Fatalf("want an error, got %+v", res)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError {
				t.Fatalf("tool error: %+v", res.Content)
			}
			var out LookupResult
			raw, _ := json.Marshal(res.StructuredContent)
			if err := json.Unmarshal(raw, &out); err != nil {
				t.Fatal(err)
			}
			if out.Provider != tc.provider || out.Title == "" || out.URL == "" || out.Snippet == "" {
				t.Fatalf("result %+v, want provider %s and all fields", out, tc.provider)
			}
		})
	}
	if got := s.Refused(ServerDocsA); got != 2 {
		t.Errorf("Refused = %d, want 2", got)
	}
	if err := s.SetFailing(ServerDocsB, true); !errors.Is(err, ErrNoFailure) {
		t.Errorf("SetFailing(B) = %v, want ErrNoFailure", err)
	}
	// The session survives a 503: a later call on the same session works.
	if err := s.SetFailing(ServerDocsA, false); err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, a, ToolDocsLookup, map[string]any{"query": "install"}); err != nil {
		t.Fatalf("call after 503: %v", err)
	}
}

func TestListingsTools(t *testing.T) {
	s := startServers(t)
	cs := connect(t, s.URL(ServerListings))
	tests := []struct {
		tool    string
		args    map[string]any
		isError bool
		want    ListingResult
	}{
		{ToolGetListing, map[string]any{"listing_id": "L-100"}, false, ListingResult{ListingID: "L-100", Status: "active"}},
		{ToolUpdateListingStatus, map[string]any{"listing_id": "L-100", "status": "sold"}, false, ListingResult{ListingID: "L-100", Status: "sold", PreviousStatus: "active"}},
		{ToolUpdateListingStatus, map[string]any{"listing_id": "L-100", "status": "gone"}, true, ListingResult{}},
		{ToolUpdateListingStatus, map[string]any{"listing_id": "L-999", "status": "sold"}, true, ListingResult{}},
		{ToolDeleteListing, map[string]any{"listing_id": "L-300"}, false, ListingResult{ListingID: "L-300", Status: "active", Deleted: true}},
		{ToolGetListing, map[string]any{"listing_id": "L-300"}, true, ListingResult{}},
	}
	for _, tc := range tests {
		res, err := call(t, cs, tc.tool, tc.args)
		if err != nil {
			t.Fatalf("%s %v: %v", tc.tool, tc.args, err)
		}
		if res.IsError != tc.isError {
			t.Fatalf("%s %v: isError=%v, want %v (%+v)", tc.tool, tc.args, res.IsError, tc.isError, res.Content)
		}
		if tc.isError {
			continue
		}
		var got ListingResult
		raw, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%s %v = %+v, want %+v", tc.tool, tc.args, got, tc.want)
		}
	}
	if n := s.Calls(ServerListings, ToolUpdateListingStatus); n != 3 {
		t.Errorf("update calls = %d, want 3", n)
	}
}

func TestDigestsStable(t *testing.T) {
	s := startServers(t)
	a, err := ListTools(context.Background(), s.URL(ServerDocsA))
	if err != nil {
		t.Fatal(err)
	}
	b, err := ListTools(context.Background(), s.URL(ServerDocsB))
	if err != nil {
		t.Fatal(err)
	}
	da, err := Digests(a.Tools[0])
	if err != nil {
		t.Fatal(err)
	}
	db, err := Digests(b.Tools[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{da.InputSchema, da.OutputSchema, da.Definition} {
		if !strings.HasPrefix(d, "sha256:") || len(d) != 71 {
			t.Errorf("digest %q is not sha256:<hex>", d)
		}
	}
	// Same schemas, different descriptions.
	if da.InputSchema != db.InputSchema || da.OutputSchema != db.OutputSchema {
		t.Errorf("schema digests differ between providers: %+v %+v", da, db)
	}
	if da.Definition == db.Definition {
		t.Errorf("definition digests equal although descriptions differ")
	}
	again, _ := Digests(a.Tools[0])
	if again != da {
		t.Errorf("digests not deterministic")
	}
}
