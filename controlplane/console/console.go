// Package console is the control plane's read-only web console: the
// registry (every exact identity, its state, lifecycle history, drift
// labels and lineage), the evidence (per subject and layer, stale and
// unknown marked), receipt search with each receipt explained in the words
// of `mcpready explain`, the probe funnel and latency bands as inline SVG,
// and the fleet of connected agents with what they ACKed or NACKed.
//
// Pages are rendered on the server from html/template with one embedded
// stylesheet: no JavaScript, no external resources, so it works offline;
// the Content-Security-Policy forbids scripts outright. Every page is also
// JSON, with ?format=json or an Accept header preferring application/json.
// Every request needs the reader (or admin) role, decided by package authz
// from the connection exactly as for the gRPC read methods.
//
// It must not change anything: it has no handler that writes, and it reads
// the store, the lifecycle, the receipt store and discovery only through
// their query methods.
package console

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/authz"
	"github.com/mcpready/mcpready/controlplane/discovery"
	"github.com/mcpready/mcpready/controlplane/receiptstore"
	"github.com/mcpready/mcpready/controlplane/store"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// Prefix is the path the console is served under.
const Prefix = "/console/"

// Registry is the registry lifecycle's status query (lifecycle.Manager).
type Registry interface {
	Status(ctx context.Context, name string) ([]*mcpreadyv1.RegistryStatus, error)
}

// Artifacts lists the latest stored artifacts of a kind (store.Store).
type Artifacts interface {
	List(ctx context.Context, k artifact.Kind) ([]store.Record, int64, error)
}

// Receipts is the receipt stores' query method (receiptstore.Store and
// receiptdb.DB): matching receipts in store order, the newest when limited.
type Receipts interface {
	Query(ctx context.Context, q receiptstore.Query) ([]*mcpreadyv1.StoredReceipt, string, error)
}

// Fleet lists the connected agents (discovery.Server).
type Fleet interface {
	Agents() []discovery.Agent
}

// Options configures a Console.
type Options struct {
	// Registry and Artifacts are required.
	Registry  Registry
	Artifacts Artifacts
	// Receipts, if nil, makes the receipt pages say that this replica
	// keeps no receipts.
	Receipts Receipts
	// Fleet, if nil, makes the fleet page say that it is unknown.
	Fleet Fleet
	// Authorizer identifies callers; required.
	Authorizer *authz.Authorizer
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives one line per refused request (path, identity,
	// reason); nil discards.
	Logger *slog.Logger
}

// ErrConfig reports incomplete Options.
var ErrConfig = errors.New("console: bad configuration")

// Console serves the pages. It is an http.Handler for Prefix.
type Console struct {
	o     Options
	pages map[string]*template.Template
	mux   *http.ServeMux
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static/console.css
var staticFS embed.FS

// New returns a Console, or an error wrapping ErrConfig.
func New(o Options) (*Console, error) {
	if o.Registry == nil || o.Artifacts == nil || o.Authorizer == nil {
		return nil, fmt.Errorf("%w: Registry, Artifacts and Authorizer are required", ErrConfig)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Console{o: o, pages: map[string]*template.Template{}, mux: http.NewServeMux()}
	funcs := template.FuncMap{"when": when, "pct": pct, "list": func() []navItem { return nav },
		"item": func(s string) string { return strings.TrimPrefix(s, "- ") }}
	for _, p := range []string{"index", "registry", "evidence", "receipts", "receipt", "probes", "fleet", "error"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+p+".html")
		if err != nil {
			return nil, fmt.Errorf("%w: template %s: %w", ErrConfig, p, err)
		}
		c.pages[p] = t
	}
	static, _ := fs.Sub(staticFS, "static")
	c.mux.Handle("GET "+Prefix+"static/", http.StripPrefix(Prefix+"static/", http.FileServerFS(static)))
	c.mux.HandleFunc("GET "+Prefix+"{$}", c.page("index", c.index))
	c.mux.HandleFunc("GET "+Prefix+"registry", c.page("registry", c.registry))
	c.mux.HandleFunc("GET "+Prefix+"evidence", c.page("evidence", c.evidence))
	c.mux.HandleFunc("GET "+Prefix+"receipts", c.page("receipts", c.receipts))
	c.mux.HandleFunc("GET "+Prefix+"receipts/{id}", c.page("receipt", c.receipt))
	c.mux.HandleFunc("GET "+Prefix+"probes", c.page("probes", c.probes))
	c.mux.HandleFunc("GET "+Prefix+"fleet", c.page("fleet", c.fleet))
	return c, nil
}

// ServeHTTP authorises the caller (reader or admin), then serves the page.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	if ref := Reader(c.o.Authorizer, r); ref != nil {
		c.o.Logger.Warn("console request refused", "path", r.URL.Path, "identity", ref.Identity, "reason", ref.Reason)
		c.fail(w, r, ref.Code(), ref.Error())
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		c.fail(w, r, http.StatusMethodNotAllowed, "the console is read-only")
		return
	}
	if f := r.URL.Query()["format"]; len(f) > 1 || len(f) == 1 && f[0] != "json" && f[0] != "html" {
		c.fail(w, r, http.StatusBadRequest, `format: want "json" or "html"`)
		return
	}
	c.mux.ServeHTTP(w, r)
}

// ReadRefusal is why a request may not read. It wraps
// authz.ErrUnauthenticated (Reason "unauthenticated": no verified client
// certificate, and not a loopback caller of a control plane without mTLS)
// or authz.ErrForbidden (Reason "forbidden": an identity without the
// reader or admin role).
type ReadRefusal struct {
	Reason   string
	Identity string // the certificate's identity; "" when unauthenticated
	err      error
}

func (e *ReadRefusal) Error() string {
	if e.Reason != "forbidden" {
		return "no verified client certificate: a certificate mapped to the reader or admin role is needed"
	}
	return fmt.Sprintf("%q holds no reader or admin role", e.Identity)
}

func (e *ReadRefusal) Unwrap() error { return e.err }

// Code is the HTTP status answering the refusal: 401 unauthenticated, 403
// forbidden.
func (e *ReadRefusal) Code() int {
	if e.Reason == "forbidden" {
		return http.StatusForbidden
	}
	return http.StatusUnauthorized
}

// Reader identifies the caller of r with az, from the connection exactly as
// for an RPC, and refuses one without the reader or admin role; nil means
// it may read. Every console request is checked with it, and so is
// /metrics on a control plane's HTTP listener off loopback.
func Reader(az *authz.Authorizer, r *http.Request) *ReadRefusal {
	id, err := az.IdentifyConn(r.TLS, remoteAddr(r.RemoteAddr))
	switch {
	case err != nil:
		return &ReadRefusal{Reason: "unauthenticated", err: err}
	case !id.MayRead():
		return &ReadRefusal{Reason: "forbidden", Identity: id.Name, err: authz.ErrForbidden}
	}
	return nil
}

func remoteAddr(s string) net.Addr {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return nil
	}
	return net.TCPAddrFromAddrPort(ap)
}

// statusError is a page error with the HTTP status to answer.
type statusError struct {
	code int
	msg  string
}

func (e *statusError) Error() string { return e.msg }

// view is what a page function returns: the page data, rendered as HTML
// or as JSON.
type view struct {
	Title string
	Nav   string // the page's name, for aria-current
	Data  any
}

func (c *Console) page(name string, fn func(*http.Request) (string, any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		title, data, err := fn(r)
		if err != nil {
			code, msg := http.StatusInternalServerError, "the console could not read the control plane's state"
			var se *statusError
			if errors.As(err, &se) {
				code, msg = se.code, se.msg
			} else {
				c.o.Logger.Error("console page failed", "page", name, "err", err)
			}
			c.fail(w, r, code, msg)
			return
		}
		nav := name
		if name == "receipt" {
			nav = "receipts" // a receipt is found through the receipt search
		}
		c.render(w, r, http.StatusOK, name, view{Title: title, Nav: nav, Data: data})
	}
}

// wantsJSON: ?format=json, or (without ?format=html) an Accept header
// that names application/json before (or without) text/html.
func wantsJSON(r *http.Request) bool {
	switch r.URL.Query().Get("format") {
	case "json":
		return true
	case "html":
		return false
	}
	acc := r.Header.Get("Accept")
	j, h := strings.Index(acc, "application/json"), strings.Index(acc, "text/html")
	return j >= 0 && (h < 0 || j < h)
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, code int, name string, v view) {
	var buf bytes.Buffer
	if wantsJSON(r) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(&buf)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v.Data); err != nil {
			c.o.Logger.Error("console json", "page", name, "err", err)
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
	} else {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if err := c.pages[name].Execute(&buf, v); err != nil {
			c.o.Logger.Error("console template", "page", name, "err", err)
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
	}
	w.WriteHeader(code)
	w.Write(buf.Bytes())
}

// errorView is the body of a refused or failed request.
type errorView struct {
	Status int    `json:"status"`
	Error  string `json:"error"`
}

func (c *Console) fail(w http.ResponseWriter, r *http.Request, code int, msg string) {
	c.render(w, r, code, "error", view{Title: http.StatusText(code), Data: errorView{Status: code, Error: msg}})
}

func when(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

func pct(rate float64) string { return fmt.Sprintf("%.1f %%", rate*100) }

// navItem is one link of the page navigation.
type navItem struct{ Name, Path, Label string }

var nav = []navItem{{"registry", "registry", "Registry"}, {"evidence", "evidence", "Evidence"}, {"receipts", "receipts", "Receipts"},
	{"probes", "probes", "Probes"}, {"fleet", "fleet", "Fleet"}}
