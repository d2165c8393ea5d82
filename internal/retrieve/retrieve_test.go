package retrieve

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

func TestFetchAndCheck(t *testing.T) {
	var body atomic.Value
	body.Store("serverName: docs\n")
	var otherReached atomic.Bool
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { otherReached.Store(true) }))
	defer other.Close()
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/declaration.yaml":
			w.Write([]byte(body.Load().(string)))
		case "/moved":
			http.Redirect(w, r, "/declaration.yaml", http.StatusFound)
		case "/away":
			http.Redirect(w, r, other.URL+"/declaration.yaml", http.StatusFound)
		case "/huge":
			w.Write([]byte(strings.Repeat("x", MaxSize+1)))
		default:
			http.NotFound(w, r)
		}
	}))
	defer src.Close()
	ctx := context.Background()
	b, d, err := Fetch(ctx, src.URL+"/moved", Options{})
	if err != nil || string(b) != "serverName: docs\n" || d != artifact.Digest(b) {
		t.Fatalf("%q %s %v", b, d, err)
	}
	for path, want := range map[string]error{"/away": ErrFetch, "/huge": ErrFetch, "/missing": ErrFetch} {
		if _, _, err := Fetch(ctx, src.URL+path, Options{}); !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", path, err, want)
		}
	}
	if otherReached.Load() {
		t.Error("a redirect to another origin was followed")
	}
	for _, u := range []string{"http://provider.example/declaration.yaml", "ftp://127.0.0.1/x", "/declaration.yaml", "https://"} {
		if _, _, err := Fetch(ctx, u, Options{}); !errors.Is(err, ErrURL) {
			t.Errorf("%s: %v, want ErrURL", u, err)
		}
	}

	o := artifact.New(artifact.KindDeclaration, "docs", &mcpreadyv1.Declaration{ServerName: "docs"})
	if err := Check(ctx, o, Options{}); !errors.Is(err, ErrNotRecorded) {
		t.Fatalf("nothing recorded: %v", err)
	}
	if err := o.RecordRetrieval(src.URL+"/declaration.yaml", d); err != nil {
		t.Fatal(err)
	}
	if err := Check(ctx, o, Options{}); err != nil {
		t.Fatalf("unchanged source: %v", err)
	}
	body.Store("serverName: docs\nowner: someone else\n")
	if err := Check(ctx, o, Options{}); !errors.Is(err, ErrChanged) {
		t.Fatalf("changed source: %v", err)
	}
	src.Close()
	if err := Check(ctx, o, Options{}); !errors.Is(err, ErrFetch) {
		t.Fatalf("unreachable source: %v", err)
	}
}
