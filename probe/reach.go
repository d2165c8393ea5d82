package probe

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/mcpready/mcpready/internal/redirect"
)

// httpClient is the probe's one HTTP client: the configured TLS, at most 3
// same-origin redirects and none to another origin, and the token or
// credential (if any) only for the endpoint's origin.
func (p *run) httpClient() *http.Client {
	if p.client != nil {
		return p.client
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	if p.o.TLS != nil {
		tr.TLSClientConfig = p.o.TLS.Clone()
	}
	var with http.RoundTripper = tr
	switch {
	case p.o.Credential != nil:
		with = p.o.Credential.Transport(tr)
	case p.o.Token != "":
		with = &bearer{base: tr, token: p.o.Token}
	}
	p.client = &http.Client{
		Transport:     &originOnly{origin: origin(p.u), with: with, base: tr},
		CheckRedirect: redirect.SameOrigin,
	}
	return p.client
}

func origin(u *url.URL) string { return strings.ToLower(u.Scheme + "://" + u.Host) }

// originOnly sends the requests for one origin through with (which
// presents the credential) and the others through base.
type originOnly struct {
	origin     string
	with, base http.RoundTripper
}

func (o *originOnly) RoundTrip(r *http.Request) (*http.Response, error) {
	if origin(r.URL) == o.origin {
		return o.with.RoundTrip(r)
	}
	return o.base.RoundTrip(r)
}

// bearer adds the token to every request.
type bearer struct {
	base  http.RoundTripper
	token string
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// reach checks DNS, the TCP connection and, for https, the TLS identity.
func (p *run) reach(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, p.o.StepTimeout)
	defer cancel()
	host, port := p.u.Hostname(), p.u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[p.u.Scheme]
	}
	addrs := []string{host}
	if net.ParseIP(host) == nil {
		var err error
		if addrs, err = net.DefaultResolver.LookupHost(ctx, host); err != nil || len(addrs) == 0 {
			return p.add(LayerReachability, NotReady, "dns", "the host name does not resolve")
		}
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(addrs[0], port))
	if err != nil {
		return p.add(LayerReachability, NotReady, netReason(err, "connect"), "no TCP connection")
	}
	defer conn.Close()
	if p.u.Scheme != "https" {
		return true
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if p.o.TLS != nil {
		cfg = p.o.TLS.Clone()
	}
	cfg.ServerName = host
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		var host x509.HostnameError
		var unknown x509.UnknownAuthorityError
		switch {
		case errors.As(err, &host):
			return p.add(LayerReachability, NotReady, "tls-identity", "the certificate is not for this host")
		case errors.As(err, &unknown):
			return p.add(LayerReachability, NotReady, "tls-untrusted", "the certificate chain is not trusted")
		}
		return p.add(LayerReachability, NotReady, netReason(err, "tls"), "the TLS handshake failed")
	}
	return true
}

func netReason(err error, fallback string) string {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return "timeout"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	return fallback
}

// firstRequest sends one initialize over plain HTTP to see how the endpoint
// answers before any MCP client is involved: reachability at the HTTP level,
// and the status that tells access apart from protocol.
func (p *run) firstRequest(ctx context.Context) (int, http.Header, bool) {
	ctx, cancel := context.WithTimeout(ctx, p.o.StepTimeout)
	defer cancel()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"mcpready-probe","version":"1"}}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.u.String(), bytes.NewReader([]byte(body)))
	if err != nil {
		p.add(LayerReachability, NotReady, "request", "the request could not be built")
		return 0, nil, false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := p.httpClient().Do(req)
	if err != nil {
		if errors.Is(err, redirect.ErrCrossOrigin) {
			p.add(LayerReachability, NotReady, "redirect", "the endpoint redirects to another origin")
			return 0, nil, false
		}
		p.add(LayerReachability, NotReady, netReason(err, "http"), "no HTTP answer")
		return 0, nil, false
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		p.closeSession(ctx, sid)
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		p.add(LayerReachability, NotReady, "redirect", "the endpoint answers with a redirect")
		return 0, nil, false
	}
	p.add(LayerReachability, Ready, "", "")
	return resp.StatusCode, resp.Header, true
}

// closeSession ends the session the first request may have opened.
func (p *run) closeSession(ctx context.Context, sid string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, p.u.String(), nil)
	if err != nil {
		return
	}
	req.Header.Set("Mcp-Session-Id", sid)
	if resp, err := p.httpClient().Do(req); err == nil {
		resp.Body.Close()
	}
}
