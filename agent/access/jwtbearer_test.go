package access

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/internal/oauthtest"
)

// workloadJWT is a JWT of issuer and subject id for audience, signed by key.
func workloadJWT(t testing.TB, key *ecdsa.PrivateKey, id, audience string, exp time.Duration) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, err := jwt.Signed(s).Claims(jwt.Claims{Issuer: id, Subject: id, Audience: jwt.Audience{audience}, ID: rand.Text(),
		IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(exp))}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func ecKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestJWTBearerWorkloadIdentity: the workload identity token in the file
// is the grant (the real op package verifies it: issuer, audience, expiry,
// signature); a rotated file is read at the next request; a token the
// authorization server rejects is ACCESS_NOT_READY without the token in
// the error, and is not retried.
func TestJWTBearerWorkloadIdentity(t *testing.T) {
	key := ecKey(t)
	as := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{{ID: "workload", AuthMethod: "none", PublicKey: &key.PublicKey, JWTBearer: true, Scopes: []string{"read"}}}})
	file := secretFile(t, workloadJWT(t, key, "workload", as.Issuer, time.Minute))
	o := config.OAuth{Grant: config.GrantJWTBearer, ClientID: "workload", TokenEndpointAuth: config.AuthNone, AssertionFile: file,
		Scopes: []string{"read"}, TokenVerification: config.VerifyUnverified}
	r := newRig(t, as, oauthtest.Resource{}, o)
	c := New(Options{})
	g, err := c.Token(context.Background(), Principal{Name: "alice"}, &r.upstream)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(g.Facts.Scopes, " ") != "read" || g.token == "" {
		t.Fatalf("grant = %+v", g.Facts)
	}
	// The agent's identity, not alice's: one cached grant for everyone.
	if c.Lookup(Principal{Name: "bob"}, &r.upstream) != g {
		t.Fatal("a workload grant is cached per principal")
	}
	for name, bad := range map[string]string{
		"wrong audience": workloadJWT(t, key, "workload", "https://wrong.example", time.Minute),
		"expired":        workloadJWT(t, key, "workload", as.Issuer, -time.Minute),
		"foreign key":    workloadJWT(t, ecKey(t), "workload", as.Issuer, time.Minute),
	} {
		o.AssertionFile = secretFile(t, bad)
		r.upstream.OAuth = o
		issued := as.Issued()
		_, err := New(Options{}).Token(context.Background(), Principal{}, &r.upstream)
		if ReasonOf(err) != ReasonTokenFailed || strings.Contains(err.Error(), bad) || strings.Contains(err.Error(), bad[:20]) {
			t.Fatalf("%s: err = %v", name, err)
		}
		if as.Issued() != issued {
			t.Fatalf("%s: a token was issued", name)
		}
	}
	o.AssertionFile = secretFile(t, "")
	r.upstream.OAuth = o
	if _, err := New(Options{}).Token(context.Background(), Principal{}, &r.upstream); ReasonOf(err) != ReasonCredentials {
		t.Fatalf("empty assertion file: err = %v", err)
	}
}

// idp is an enterprise identity provider for the ID-JAG grant: it checks
// the RFC 8693 request the agent makes (subject token and its type, the
// requested type, audience and resource) and answers an ID-JAG signed by
// the key the authorization server trusts for the identity provider's
// grants.
type idp struct {
	*httptest.Server
	idToken, wantAudience, wantResource string
	issuedType                          string
	key                                 *ecdsa.PrivateKey
	requests                            int
	t                                   testing.TB
}

func (p *idp) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.requests++
	_ = r.ParseForm()
	f := r.PostForm
	w.Header().Set("Content-Type", "application/json")
	if f.Get("grant_type") != grantTypeExchange || f.Get("subject_token") != p.idToken || f.Get("subject_token_type") != tokenTypeIDToken ||
		f.Get("requested_token_type") != tokenTypeIDJAG || f.Get("audience") != p.wantAudience || f.Get("resource") != p.wantResource || f.Get("client_id") != "agent-at-idp" {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_request", "error_description": "secret detail " + f.Encode()})
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]string{"access_token": workloadJWT(p.t, p.key, "idp-grants", p.wantAudience, time.Minute),
		"issued_token_type": p.issuedType, "token_type": "N_A"})
}

// TestIDJAG: the ID token is exchanged at the identity provider for an
// ID-JAG for the authorization server and the resource, which the real op
// package then accepts as a JWT-bearer grant of the authenticated client;
// an identity provider that answers another token type is refused before
// anything reaches the authorization server.
func TestIDJAG(t *testing.T) {
	key := ecKey(t)
	as := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{
		{ID: "idp-grants", PublicKey: &key.PublicKey, JWTBearer: true},
		{ID: "mcp-client", Secret: "mcp-secret"},
	}})
	p := &idp{idToken: "the-enterprise-id-token", wantAudience: as.Issuer, issuedType: tokenTypeIDJAG, key: key, t: t}
	p.Server = httptest.NewServer(p)
	t.Cleanup(p.Close)
	o := config.OAuth{Grant: config.GrantIDJAG, ClientID: "mcp-client", ClientSecretFile: secretFile(t, "mcp-secret"), TokenVerification: config.VerifyUnverified,
		EnterpriseIdP: &config.EnterpriseIdP{TokenEndpoint: p.URL + "/token", ClientID: "agent-at-idp", IDTokenFile: secretFile(t, p.idToken)}}
	r := newRig(t, as, oauthtest.Resource{}, o)
	p.wantResource = r.url
	if _, err := New(Options{}).Token(context.Background(), Principal{}, &r.upstream); err != nil {
		t.Fatal(err)
	}
	if p.requests != 1 || as.Issued() != 1 {
		t.Fatalf("idp requests %d, tokens issued %d", p.requests, as.Issued())
	}
	p.issuedType = tokenTypeAccessToken
	_, err := New(Options{}).Token(context.Background(), Principal{}, &r.upstream)
	if ReasonOf(err) != ReasonTokenFailed || as.Issued() != 1 {
		t.Fatalf("another issued_token_type: err = %v, issued %d", err, as.Issued())
	}
	p.idToken = "another-id-token"
	_, err = New(Options{}).Token(context.Background(), Principal{}, &r.upstream)
	if ReasonOf(err) != ReasonTokenFailed || strings.Contains(err.Error(), "secret detail") || strings.Contains(err.Error(), "the-enterprise-id-token") {
		t.Fatalf("rejected exchange: err = %v", err)
	}
}
