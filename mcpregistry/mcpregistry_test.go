package mcpregistry_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/mcpregistry"
)

// Recorded pages shaped as the registry's published API documents them:
// {"servers": [{"server": server.json, "_meta": {...official: ...}}],
// "metadata": {"nextCursor": ..., "count": ...}}.
var pages = map[string]string{
	"": `{"servers":[
 {"server":{"name":"io.github.acme/docs","version":"2.4.1","description":"Docs","remotes":[{"type":"streamable-http","url":"https://docs.acme.example/mcp"}],
   "_meta":{"io.modelcontextprotocol.registry/publisher-provided":{"tool":"ci"}}},
  "_meta":{"io.modelcontextprotocol.registry/official":{"status":"active","publishedAt":"2026-09-01T10:00:00Z","updatedAt":"2026-09-01T10:00:00Z","isLatest":true}}},
 {"server":{"name":"io.github.acme/docs","version":"2.4.0","remotes":[{"type":"streamable-http","url":"https://docs.acme.example/mcp"}]},
  "_meta":{"io.modelcontextprotocol.registry/official":{"status":"active","publishedAt":"2026-08-01T10:00:00Z","isLatest":false}}}
 ],"metadata":{"nextCursor":"io.github.acme/docs:2.4.0","count":2}}`,
	"io.github.acme/docs:2.4.0": `{"servers":[
 {"server":{"name":"io.github.old/gone","version":"1.0.0","remotes":[{"type":"streamable-http","url":"https://gone.example/mcp"}]},
  "_meta":{"io.modelcontextprotocol.registry/official":{"status":"deleted","isLatest":true}}},
 {"server":{"name":"io.github.pkg/only","version":"0.3.0","packages":[{"registryType":"npm","identifier":"@pkg/only","version":"0.3.0"}]},
  "_meta":{"io.modelcontextprotocol.registry/official":{"status":"active","isLatest":true}}},
 {"name":"io.github.flat/legacy","version":"1.2.0","remotes":[{"type":"sse","url":"https://flat.example/sse"},{"type":"streamable-http","url":"https://flat.example/mcp"}]}
 ],"metadata":{"count":3}}`,
}

func registry(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(answer))
	t.Cleanup(ts.Close)
	return ts
}

func recorded(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v0/servers" || r.URL.Query().Get("limit") == "" {
		http.NotFound(w, r)
		return
	}
	p, ok := pages[r.URL.Query().Get("cursor")]
	if !ok {
		http.Error(w, `{"error":"bad cursor"}`, http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(p))
}

func TestImport(t *testing.T) {
	ts := registry(t, recorded)
	l, err := mcpregistry.List(context.Background(), ts.URL, mcpregistry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range l.Records {
		names = append(names, r.Server.Name+"@"+r.Server.Version)
	}
	if strings.Join(names, " ") != "io.github.acme/docs@2.4.1 io.github.pkg/only@0.3.0 io.github.flat/legacy@1.2.0" || l.Pages != 2 || l.Partial != "" {
		t.Fatalf("records %v pages %d partial %q", names, l.Pages, l.Partial)
	}
	all, err := mcpregistry.List(context.Background(), ts.URL, mcpregistry.Options{AllVersions: true})
	if err != nil || len(all.Records) != 4 {
		t.Fatalf("all versions: %v %d", err, len(all.Records))
	}

	drafts := mcpregistry.Drafts(ts.URL, l.Records)
	if len(drafts) != 2 {
		t.Fatalf("%d drafts (want one per streamable-http remote: the package-only server gives none)", len(drafts))
	}
	d := drafts[0]
	e := d.Spec.(*mcpreadyv1.RegistryEntry)
	if err := d.Validate(); err != nil || d.Metadata.Name != "imported/io.github.acme/docs@2.4.1" {
		t.Fatalf("%q: %v", d.Metadata.Name, err)
	}
	if e.GetState() != mcpreadyv1.LifecycleState_LIFECYCLE_STATE_CANDIDATE || e.GetIdentity().GetEndpoint() != "https://docs.acme.example/mcp" ||
		e.GetIdentity().GetToolName() != "" || e.GetQualification() != nil ||
		e.GetDiscoverySource() != "mcp-registry:"+ts.URL+"/v0/servers/io.github.acme%2Fdocs/versions/2.4.1" {
		t.Fatalf("entry %v", e)
	}
	if d.Metadata.Labels[mcpregistry.LabelRegistryStatus] != "active" || d.Metadata.Labels[mcpregistry.LabelPublisherMeta] != "present" ||
		d.Metadata.Labels[mcpregistry.LabelRegistryVersion] != "2.4.1" || d.Metadata.Labels[mcpregistry.LabelPublisherVerification] != "github" {
		t.Fatalf("labels %v", d.Metadata.Labels)
	}
	if l := drafts[1].Metadata.Labels; l[mcpregistry.LabelRegistryStatus] != "unknown" || l[mcpregistry.LabelPublisherMeta] != "absent" ||
		l[mcpregistry.LabelPublisherVerification] != "none-recorded" {
		t.Fatalf("flat record labels %v", l)
	}
}

// TestPublisherVerification: a domain-named record with the registry's own
// metadata is domain-verified, the same record without it has nothing
// recorded.
func TestPublisherVerification(t *testing.T) {
	rec := func(official bool) mcpregistry.Record {
		return mcpregistry.Record{HasOfficial: official, Server: mcpregistry.Server{Name: "com.example/docs", Version: "1.0.0",
			Remotes: []mcpregistry.Remote{{Type: "streamable-http", URL: "https://docs.example.com/mcp"}}}}
	}
	d := mcpregistry.Drafts("https://registry.example", []mcpregistry.Record{rec(true), rec(false)})
	if len(d) != 2 || d[0].Metadata.Labels[mcpregistry.LabelPublisherVerification] != "domain" ||
		d[1].Metadata.Labels[mcpregistry.LabelPublisherVerification] != "none-recorded" {
		t.Fatalf("labels %v / %v", d[0].Metadata.Labels, d[1].Metadata.Labels)
	}
}

func TestBadRegistries(t *testing.T) {
	loop := registry(t, func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"servers":[],"metadata":{"nextCursor":"same"}}`))
	})
	l, err := mcpregistry.List(context.Background(), loop.URL, mcpregistry.Options{})
	if err != nil || l.Partial != "cursor-loop" || l.Pages != 2 {
		t.Fatalf("loop: %v %+v", err, l)
	}
	n := 0
	endless := registry(t, func(w http.ResponseWriter, r *http.Request) {
		n++
		w.Write([]byte(`{"servers":[],"metadata":{"nextCursor":"c` + strings.Repeat("x", n) + `"}}`))
	})
	if l, err := mcpregistry.List(context.Background(), endless.URL, mcpregistry.Options{MaxPages: 5}); err != nil || l.Partial != "page-limit" || l.Pages != 5 {
		t.Fatalf("endless: %v %+v", err, l)
	}
	for name, body := range map[string]string{
		"garbage":                    "<html>",
		"no name":                    `{"servers":[{"server":{"version":"1"}}]}`,
		"bad meta":                   `{"servers":[{"server":{"name":"a","version":"1"},"_meta":{"io.modelcontextprotocol.registry/official":{"publishedAt":7}}}]}`,
		"not array":                  `{"servers":{}}`,
		"server _meta not an object": `{"servers":[{"server":{"name":"a","version":"1","_meta":5}}]}`,
		"name spelt twice":           `{"servers":[{"server":{"name":"com.evil/x","version":"1","Name":"io.github.trusted/x"}}]}`,
		"_meta spelt otherwise":      `{"servers":[{"server":{"name":"a","version":"1"},"_metA":{"io.modelcontextprotocol.registry/official":{}}}]}`,
	} {
		ts := registry(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(body)) })
		if _, err := mcpregistry.List(context.Background(), ts.URL, mcpregistry.Options{}); !errors.Is(err, mcpregistry.ErrResponse) {
			t.Errorf("%s: %v", name, err)
		}
	}
	down := registry(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	if _, err := mcpregistry.List(context.Background(), down.URL, mcpregistry.Options{}); !errors.Is(err, mcpregistry.ErrResponse) {
		t.Errorf("503: %v", err)
	}
	if _, err := mcpregistry.List(context.Background(), "ftp://x", mcpregistry.Options{}); !errors.Is(err, mcpregistry.ErrURL) {
		t.Errorf("ftp: %v", err)
	}
}

// TestBadCursor: the registry refuses the cursor its own first page named
// (400): the walk stops with a typed error naming the page, not a loop or a
// silent partial listing.
func TestBadCursor(t *testing.T) {
	var asked []string
	ts := registry(t, func(w http.ResponseWriter, r *http.Request) {
		c := r.URL.Query().Get("cursor")
		asked = append(asked, c)
		if c == "" {
			w.Write([]byte(`{"servers":[],"metadata":{"nextCursor":"not a cursor&limit=1"}}`))
			return
		}
		http.Error(w, `{"error":"invalid cursor"}`, http.StatusBadRequest)
	})
	_, err := mcpregistry.List(context.Background(), ts.URL, mcpregistry.Options{})
	if !errors.Is(err, mcpregistry.ErrResponse) || !strings.Contains(err.Error(), "page 2") {
		t.Fatalf("bad cursor: %v", err)
	}
	if len(asked) != 2 || asked[1] != "not a cursor&limit=1" {
		t.Fatalf("cursors sent %q (the cursor must be sent escaped, as given)", asked)
	}
}

// FuzzList serves arbitrary bytes as every page: List returns a typed error
// or a listing of at most MaxPages pages, and never panics.
func FuzzList(f *testing.F) {
	for _, p := range pages {
		f.Add([]byte(p))
	}
	f.Add([]byte(`{"servers":[],"metadata":{"nextCursor":"x"}}`))
	f.Add([]byte(`{"servers":[{"server":{"name":"a","version":"1","remotes":[{"type":"streamable-http","url":"::"}]}}]}`))
	var body atomic.Value
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body.Load().([]byte)) }))
	defer ts.Close()
	f.Fuzz(func(t *testing.T, b []byte) {
		body.Store(b)
		l, err := mcpregistry.List(context.Background(), ts.URL, mcpregistry.Options{MaxPages: 3})
		if err != nil {
			if !errors.Is(err, mcpregistry.ErrResponse) && !errors.Is(err, mcpregistry.ErrTooLarge) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if l.Pages > 3 {
			t.Fatalf("%d pages, bound 3", l.Pages)
		}
		mcpregistry.Drafts(ts.URL, l.Records)
	})
}

// TestShortenName: a name within the bound is kept; a longer one is cut to
// the bound, without a trailing "/" before the suffix, and suffixed with
// 12 hex digits of its SHA-256, so long names sharing a prefix stay apart.
// Drafts bounds its names with it to 253 characters.
func TestShortenName(t *testing.T) {
	long := strings.Repeat("a", 40)
	if got := mcpregistry.ShortenName(long, 40); got != long {
		t.Fatalf("within the bound: %q", got)
	}
	a, b := mcpregistry.ShortenName(long+"x", 40), mcpregistry.ShortenName(long+"y", 40)
	sum := sha256.Sum256([]byte(long + "x"))
	if a == b || len(a) != 40 || a != long[:27]+"/"+hex.EncodeToString(sum[:6]) {
		t.Fatalf("cut: %q %q", a, b)
	}
	if got := mcpregistry.ShortenName(long[:26]+"/"+long, 40); got[:27] != long[:26]+"/" || strings.Contains(got, "//") {
		t.Fatalf("trailing slash kept: %q", got)
	}
	server := "io.example/" + strings.Repeat("a", 300)
	d := mcpregistry.Drafts("https://registry.example", []mcpregistry.Record{{Server: mcpregistry.Server{Name: server, Version: "1",
		Remotes: []mcpregistry.Remote{{Type: "streamable-http", URL: "https://mcp.example/mcp"}}}}})
	if len(d) != 1 || d[0].Metadata.Name != mcpregistry.ShortenName("imported/"+server+"@1", 253) || d[0].Validate() != nil {
		t.Fatalf("drafts %v", d)
	}
}
