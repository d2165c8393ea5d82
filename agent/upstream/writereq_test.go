package upstream

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/http/httpguts"
)

// parsed is what a server reads of a request written by write.
func parsed(t *testing.T, req func() *http.Request, write func(*bufio.Writer, *http.Request) error) (*http.Request, []byte) {
	t.Helper()
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	if err := write(w, req()); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	r, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(b.Bytes())))
	if err != nil {
		t.Fatalf("unreadable request %q: %v", b.Bytes(), err)
	}
	body, _ := io.ReadAll(r.Body)
	return r, body
}

// writeRequest writes what Request.Write writes, as a server reads it;
// any request it does not handle is left to Request.Write untouched.
func TestWriteRequest(t *testing.T) {
	build := func(url, body string, h http.Header) func() *http.Request {
		return func() *http.Request {
			r, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			r.Header = h.Clone()
			return r
		}
	}
	std := func(w *bufio.Writer, r *http.Request) error { return r.Write(w) }
	own := func(w *bufio.Writer, r *http.Request) error {
		ok, err := writeRequest(w, r)
		if !ok {
			t.Fatalf("not handled: %s %v", r.URL, r.Header)
		}
		return err
	}
	for name, req := range map[string]func() *http.Request{
		"call": build("http://127.0.0.1:8080/mcp?x=1&y=%20", `{"jsonrpc":"2.0"}`, http.Header{"Content-Type": {"application/json"},
			"Accept": {"application/json, text/event-stream"}, "Mcp-Session-Id": {"abc"}, "Authorization": {"Bearer t"}, "X-Multi": {"a", " b "}}),
		"empty body":    build("http://example.com/", "", http.Header{}),
		"ipv6 and path": build("http://[::1]:9/a%2Fb/c", "x", http.Header{"Traceparent": {"00-1-2-01"}}),
	} {
		want, wantBody := parsed(t, req, std)
		got, gotBody := parsed(t, req, own)
		if got.Method != want.Method || got.RequestURI != want.RequestURI || got.Host != want.Host || got.ContentLength != want.ContentLength ||
			!reflect.DeepEqual(got.Header, want.Header) || !bytes.Equal(gotBody, wantBody) {
			t.Errorf("%s: wrote %s %s %s %d %v %q\n want %s %s %s %d %v %q", name, got.Method, got.RequestURI, got.Host, got.ContentLength, got.Header, gotBody,
				want.Method, want.RequestURI, want.Host, want.ContentLength, want.Header, wantBody)
		}
	}
	// Left to Request.Write: other methods, unknown lengths, header fields
	// Request.Write treats itself, and invalid fields (which it sanitises).
	for name, mk := range map[string]func() *http.Request{
		"get":            func() *http.Request { r, _ := http.NewRequest(http.MethodGet, "http://h/", nil); return r },
		"unknown length": func() *http.Request { r := build("http://h/", "x", nil)(); r.ContentLength = -1; return r },
		"chunked": func() *http.Request {
			r := build("http://h/", "x", nil)()
			r.TransferEncoding = []string{"chunked"}
			return r
		},
		"close":         func() *http.Request { r := build("http://h/", "x", nil)(); r.Close = true; return r },
		"host header":   build("http://h/", "x", http.Header{"Host": {"other"}}),
		"user agent":    build("http://h/", "x", http.Header{"User-Agent": {"me"}}),
		"newline value": build("http://h/", "x", http.Header{"X-A": {"a\r\nX-Injected: 1"}}),
		"bad name":      build("http://h/", "x", http.Header{"X A": {"a"}}),
		"bad host":      func() *http.Request { r := build("http://h/", "x", nil)(); r.Host = "h\r\nX: y"; return r },
	} {
		var b bytes.Buffer
		w := bufio.NewWriter(&b)
		if ok, err := writeRequest(w, mk()); ok || err != nil {
			t.Errorf("%s: handled (%v)", name, err)
		}
		w.Flush()
		if b.Len() != 0 {
			t.Errorf("%s: wrote %q", name, b.Bytes())
		}
	}
}

// FuzzWriteRequest: whatever header a request carries, writeRequest either
// leaves it to Request.Write or writes a request a server reads with
// exactly those fields.
func FuzzWriteRequest(f *testing.F) {
	f.Add("Mcp-Session-Id", "abc", "/mcp", "body")
	f.Add("X-A", "a\nb", "/p?q=1", "")
	f.Add("X-B", " padded\t", "/%zz", "x")
	f.Fuzz(func(t *testing.T, key, value, path, body string) {
		r, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:1"+path, strings.NewReader(body))
		if err != nil || r.URL.Opaque != "" {
			return
		}
		r.Header = http.Header{key: {value}}
		var b bytes.Buffer
		w := bufio.NewWriter(&b)
		ok, err := writeRequest(w, r)
		if !ok {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		w.Flush()
		got, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(b.Bytes())))
		if err != nil {
			t.Fatalf("unreadable %q: %v", b.Bytes(), err)
		}
		gb, _ := io.ReadAll(got.Body)
		if string(gb) != body || got.Header.Get(key) != strings.Trim(value, " \t") || len(got.Header) != 3 && len(got.Header) != 2 {
			t.Fatalf("%q → %v %q", b.Bytes(), got.Header, gb)
		}
	})
}

// FuzzReservedField: for every valid field name, reservedField answers as
// comparing its canonical form with the reserved names does.
func FuzzReservedField(f *testing.F) {
	for _, k := range []string{"Host", "host", "USER-AGENT", "content-length", "Transfer-encoding", "trailer", "connection", "Mcp-Session-Id", "Hos", "Hostt", "K-", "-a"} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, k string) {
		if !httpguts.ValidHeaderFieldName(k) {
			return
		}
		if got, want := reservedField(k), slices.Contains(reservedFields[:], http.CanonicalHeaderKey(k)); got != want {
			t.Fatalf("reservedField(%q) = %v, canonical %q", k, got, http.CanonicalHeaderKey(k))
		}
	})
}

// newRequest makes the request http.NewRequestWithContext makes (same
// wire form, length, body on a retry, context), in fewer allocations.
func TestNewRequest(t *testing.T) {
	const endpoint = "http://127.0.0.1:8080/mcp?x=1"
	h := &httpSession{url: mustURL(t, endpoint)}
	ctx := context.WithValue(context.Background(), exchangeKey{}, &exchange{})
	for _, method := range []string{http.MethodPost, http.MethodGet} {
		var body []byte
		if method == http.MethodPost {
			body = []byte(`{"jsonrpc":"2.0"}`)
		}
		got := h.newRequest(ctx, method, http.Header{"Accept": {"text/event-stream"}}, body)
		want, err := http.NewRequestWithContext(ctx, method, endpoint, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		want.Header.Set("Accept", "text/event-stream")
		if got.Context() != ctx || got.ContentLength != want.ContentLength || got.Host != want.Host || *got.URL != *want.URL {
			t.Errorf("%s: request %+v, want %+v", method, got, want)
		}
		if (got.GetBody == nil) != (len(body) == 0) {
			t.Errorf("%s: GetBody %v for a body of %d bytes", method, got.GetBody != nil, len(body))
		} else if got.GetBody != nil {
			rc, _ := got.GetBody()
			if b, _ := io.ReadAll(rc); !bytes.Equal(b, body) {
				t.Errorf("%s: GetBody read %q", method, b)
			}
		}
		var gw, ww bytes.Buffer
		if err := got.Write(&gw); err != nil {
			t.Fatal(err)
		}
		if err := want.Write(&ww); err != nil {
			t.Fatal(err)
		}
		if gw.String() != ww.String() {
			t.Errorf("%s: wrote\n%q\nwant\n%q", method, gw.String(), ww.String())
		}
	}
	body := []byte(`{}`)
	ours := testing.AllocsPerRun(100, func() { h.newRequest(ctx, http.MethodPost, nil, body) })
	theirs := testing.AllocsPerRun(100, func() { _, _ = http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body)) })
	if ours >= theirs {
		t.Errorf("newRequest: %v allocations, http.NewRequestWithContext: %v", ours, theirs)
	}
	// A body costs only its GetBody: its reader, closer included, is part
	// of the request's parts.
	if none := testing.AllocsPerRun(100, func() { h.newRequest(ctx, http.MethodGet, nil, nil) }); ours > none+1 {
		t.Errorf("newRequest: %v allocations with a body, %v without", ours, none)
	}
}

// writeRequest allocates nothing beyond what copying the body (io.CopyN)
// does.
func TestWriteRequestAllocations(t *testing.T) {
	w := bufio.NewWriter(io.Discard)
	body := []byte(`{"jsonrpc":"2.0"}`)
	req := &http.Request{Method: http.MethodPost, URL: mustURL(t, "http://127.0.0.1:8080/mcp"), Header: http.Header{"Accept": {"text/event-stream"}},
		ContentLength: int64(len(body))}
	r := bytes.NewReader(body)
	req.Body = io.NopCloser(r)
	copying := testing.AllocsPerRun(100, func() {
		r.Reset(body)
		_, _ = io.CopyN(w, r, req.ContentLength)
	})
	if n := testing.AllocsPerRun(100, func() {
		r.Reset(body)
		if ok, err := writeRequest(w, req); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}); n > copying {
		t.Errorf("writeRequest: %v allocations, copying its body: %v", n, copying)
	}
}
