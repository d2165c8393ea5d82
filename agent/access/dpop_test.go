package access

import (
	"bytes"
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/config"
)

// dpopClaims are the claims of a proof.
type dpopClaims struct {
	JTI   string `json:"jti"`
	HTM   string `json:"htm"`
	HTU   string `json:"htu"`
	IAT   int64  `json:"iat"`
	ATH   string `json:"ath"`
	Nonce string `json:"nonce"`
}

// checkProof verifies a DPoP proof as RFC 9449 §4.3 says (one header, typ
// dpop+jwt, an asymmetric algorithm, a public jwk that verifies the
// signature, htm and htu of the request, a recent iat) and returns its
// claims and the key's thumbprint.
func checkProof(hdr http.Header, method, htu string) (*dpopClaims, string, string) {
	vs := hdr.Values("DPoP")
	if len(vs) != 1 {
		return nil, "", "want exactly one DPoP header"
	}
	jws, err := jose.ParseSigned(vs[0], []jose.SignatureAlgorithm{jose.ES256, jose.ES384, jose.RS256, jose.EdDSA})
	if err != nil || len(jws.Signatures) != 1 {
		return nil, "", "not a JWS"
	}
	h := jws.Signatures[0].Protected
	if h.ExtraHeaders["typ"] != "dpop+jwt" || h.JSONWebKey == nil || !h.JSONWebKey.IsPublic() {
		return nil, "", "typ or jwk wrong"
	}
	payload, err := jws.Verify(h.JSONWebKey)
	if err != nil {
		return nil, "", "signature does not verify with the embedded key"
	}
	var c dpopClaims
	if json.Unmarshal(payload, &c) != nil || c.JTI == "" || c.HTM != method || c.HTU != htu || time.Since(time.Unix(c.IAT, 0)).Abs() > time.Minute {
		return nil, "", "claims wrong: " + string(payload)
	}
	tp, _ := h.JSONWebKey.Thumbprint(crypto.SHA256)
	return &c, base64.RawURLEncoding.EncodeToString(tp), ""
}

// dpopRig is an authorization server and an MCP server that require DPoP,
// each with a server nonce, checking every proof.
type dpopRig struct {
	t         *testing.T
	mu        sync.Mutex
	as, rs    *httptest.Server
	tokenType string
	// algs is the resource's dpop_signing_alg_values_supported.
	algs []string
	// rotate makes the token endpoint demand a new nonce every time.
	rotate                bool
	tokenRequests, nonces int
	jtis                  map[string]bool
	thumbprints           map[string]bool
	failures              []string
	schemes               map[string]bool
}

func (d *dpopRig) fail(f string) {
	d.mu.Lock()
	d.failures = append(d.failures, f)
	d.mu.Unlock()
}

func (d *dpopRig) seen(c *dpopClaims, tp string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.jtis[c.JTI] {
		d.failures = append(d.failures, "a proof was reused")
	}
	d.jtis[c.JTI], d.thumbprints[tp] = true, true
}

func newDPoPRig(t *testing.T) *dpopRig {
	d := &dpopRig{t: t, tokenType: "DPoP", jtis: map[string]bool{}, thumbprints: map[string]bool{}, schemes: map[string]bool{}}
	d.as = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/.well-known/oauth-authorization-server":
			_ = json.NewEncoder(w).Encode(map[string]any{"issuer": d.as.URL, "token_endpoint": d.as.URL + "/token", "authorization_endpoint": d.as.URL + "/authorize", "response_types_supported": []string{"code"}, "code_challenge_methods_supported": []string{"S256"},
				"dpop_signing_alg_values_supported": []string{"ES256"}, "grant_types_supported": []string{"client_credentials"}})
		case "/token":
			d.mu.Lock()
			d.tokenRequests++
			n := d.tokenRequests
			d.mu.Unlock()
			c, tp, bad := checkProof(r.Header, http.MethodPost, d.as.URL+"/token")
			if bad != "" {
				d.fail("token endpoint: " + bad)
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write([]byte(`{"error":"invalid_dpop_proof"}`))
				return
			}
			d.seen(c, tp)
			want := "as-nonce"
			if d.rotate {
				want = "as-nonce-" + strings.Repeat("x", n)
			}
			if c.Nonce != want || c.ATH != "" {
				w.Header().Set("DPoP-Nonce", want)
				w.WriteHeader(http.StatusBadRequest)
				_, _ = w.Write([]byte(`{"error":"use_dpop_nonce"}`))
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "dpop-bound-token", "token_type": d.tokenType, "expires_in": 3600})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(d.as.Close)
	srv := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, struct{}, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, struct{}{}, nil
	})
	mcpH := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	d.rs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/.well-known/oauth-protected-resource") {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"resource": d.rs.URL + "/mcp", "authorization_servers": []string{d.as.URL}, "dpop_signing_alg_values_supported": d.algs})
			return
		}
		scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		d.mu.Lock()
		d.schemes[scheme] = true
		d.mu.Unlock()
		if scheme == "" {
			w.Header().Set("WWW-Authenticate", `DPoP resource_metadata="`+d.rs.URL+`/.well-known/oauth-protected-resource/mcp"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		c, tp, bad := checkProof(r.Header, r.Method, d.rs.URL+"/mcp")
		sum := sha256.Sum256([]byte(tok))
		switch {
		case bad != "":
			d.fail("resource: " + bad)
		case scheme != "DPoP" || tok != "dpop-bound-token":
			d.fail("resource: token presented as " + scheme)
		case c.ATH != base64.RawURLEncoding.EncodeToString(sum[:]):
			d.fail("resource: ath does not bind the token")
		}
		if bad != "" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		d.seen(c, tp)
		if c.Nonce != "rs-nonce" {
			d.mu.Lock()
			d.nonces++
			d.mu.Unlock()
			w.Header().Set("DPoP-Nonce", "rs-nonce")
			w.Header().Set("WWW-Authenticate", `DPoP error="use_dpop_nonce"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		mcpH.ServeHTTP(w, r)
	}))
	t.Cleanup(d.rs.Close)
	return d
}

func (d *dpopRig) upstream(o *config.DPoP) Upstream {
	return Upstream{Name: "dpop", URL: d.rs.URL + "/mcp", OAuth: config.OAuth{Grant: config.GrantClientCredentials, ClientID: "svc",
		ClientSecretFile: secretFile(d.t, "svc-secret"), TokenVerification: config.VerifyUnverified, DPoP: o}}
}

func callThrough(ctx context.Context, c *Client, up Upstream) error {
	cl := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	cs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: up.URL, HTTPClient: &http.Client{Transport: c.Transport(nil, up)}, MaxRetries: -1}, nil)
	if err != nil {
		return err
	}
	defer cs.Close()
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}})
	return err
}

// TestDPoP: every token request and every request to the upstream
// carries a fresh, valid proof of one key (bound to the token by ath on
// the upstream's requests), the token is presented with the DPoP scheme,
// and both servers' nonces are honoured.
func TestDPoP(t *testing.T) {
	d := newDPoPRig(t)
	if err := callThrough(context.Background(), New(Options{}), d.upstream(&config.DPoP{})); err != nil {
		t.Fatal(err)
	}
	if len(d.failures) > 0 {
		t.Fatal(d.failures)
	}
	if d.tokenRequests != 2 || d.nonces != 1 || len(d.thumbprints) != 1 || d.schemes["Bearer"] || len(d.jtis) < 4 {
		t.Fatalf("token requests %d, resource nonce challenges %d, keys %d, schemes %v, proofs %d", d.tokenRequests, d.nonces, len(d.thumbprints), d.schemes, len(d.jtis))
	}
}

// TestDPoPKeyFile: the proofs are signed by the configured key.
func TestDPoPKeyFile(t *testing.T) {
	d := newDPoPRig(t)
	key := ecKey(t)
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "dpop.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := callThrough(context.Background(), New(Options{}), d.upstream(&config.DPoP{KeyFile: file})); err != nil {
		t.Fatal(err)
	}
	tp, _ := (&jose.JSONWebKey{Key: &key.PublicKey}).Thumbprint(crypto.SHA256)
	if want := base64.RawURLEncoding.EncodeToString(tp); len(d.thumbprints) != 1 || !d.thumbprints[want] {
		t.Fatalf("proof keys %v, want only %s", d.thumbprints, want)
	}
	_, err = New(Options{}).Token(context.Background(), Principal{}, ptr(d.upstream(&config.DPoP{KeyFile: secretFile(t, "not a key")})))
	if ReasonOf(err) != ReasonCredentials {
		t.Fatalf("bad key file: %v", err)
	}
}

// TestDPoPRefusals: a bearer token where DPoP is configured is refused,
// a key of an algorithm the resource does not list is not used, and a token endpoint that demands a new nonce every time is given up on
// after MaxNonceRetries resends.
func TestDPoPRefusals(t *testing.T) {
	d := newDPoPRig(t)
	d.tokenType = "Bearer"
	up := d.upstream(&config.DPoP{})
	_, err := New(Options{}).Token(context.Background(), Principal{}, &up)
	if ReasonOf(err) != ReasonTokenFailed || strings.Contains(err.Error(), "dpop-bound-token") {
		t.Fatalf("bearer token for a DPoP upstream: %v", err)
	}
	d.tokenType, d.algs, d.tokenRequests = "DPoP", []string{"RS256"}, 0
	_, err = New(Options{}).Token(context.Background(), Principal{}, &up)
	if ReasonOf(err) != ReasonNotConfigured || d.tokenRequests != 0 {
		t.Fatalf("key algorithm the resource does not accept: %v after %d token requests", err, d.tokenRequests)
	}
	d.algs, d.rotate, d.tokenRequests = []string{"ES256"}, true, 0
	up = d.upstream(&config.DPoP{MaxNonceRetries: 3})
	_, err = New(Options{}).Token(context.Background(), Principal{}, &up)
	if ReasonOf(err) != ReasonTokenFailed || d.tokenRequests != 4 {
		t.Fatalf("endless nonces: %v after %d token requests, want 4", err, d.tokenRequests)
	}
}

func ptr[T any](v T) *T { return &v }

// FuzzUseDPoPNonce: any answer is classified without a panic, and a token
// endpoint's body reads back unchanged.
func FuzzUseDPoPNonce(f *testing.F) {
	f.Add(401, `DPoP error="use_dpop_nonce"`, "")
	f.Add(400, "", `{"error":"use_dpop_nonce"}`)
	f.Add(400, "", `{"error":`)
	f.Add(401, `Bearer error="use_dpop_nonce", DPoP realm="x"`, "")
	f.Fuzz(func(t *testing.T, status int, challenge, body string) {
		resp := &http.Response{StatusCode: status, Header: http.Header{"Www-Authenticate": {challenge}}, Body: io.NopCloser(strings.NewReader(body))}
		got := UseDPoPNonce(resp)
		if status != 400 && status != 401 && got {
			t.Fatalf("status %d classified as a nonce challenge", status)
		}
		if status == 400 && len(body) <= 1<<16 {
			b, _ := io.ReadAll(resp.Body)
			if !bytes.Equal(b, []byte(body)) {
				t.Fatal("the body changed")
			}
		}
	})
}

// TestDPoPProofHTU: htu never carries the request's query or fragment
// (RFC 9449 §4.2), and each proof has its own jti.
func TestDPoPProofHTU(t *testing.T) {
	s, err := newDPoP(&config.DPoP{})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "https://up.example/mcp?session=secret#frag", nil)
	var jtis []string
	for range 2 {
		p, err := s.proof(req.Method, req.URL, "tok", "", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{"Dpop": {p}}
		c, _, bad := checkProof(h, http.MethodGet, "https://up.example/mcp")
		if bad != "" {
			t.Fatalf("proof: %s", bad)
		}
		jtis = append(jtis, c.JTI)
	}
	if jtis[0] == jtis[1] {
		t.Fatal("two proofs share a jti")
	}
}
