package access

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/internal/oauthtest"
	"golang.org/x/oauth2/clientcredentials"
)

func idpToken(t *testing.T, as *oauthtest.Server, client, audience string) string {
	t.Helper()
	cc := clientcredentials.Config{ClientID: client, ClientSecret: client + "-secret", TokenURL: as.TokenEndpoint(), EndpointParams: url.Values{"resource": {audience}}}
	tok, err := cc.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return tok.AccessToken
}

// TestIdentityVerifier: local clients authenticate with JWTs of the
// organisation's identity provider; forged, foreign, expired, wrong-audience
// and claim-less tokens are refused (before: every JWT was an unknown
// bearer token, or the default principal).
func TestIdentityVerifier(t *testing.T) {
	claims := map[string]any{"principal_class": "developer", "tenant_class": "acme", "workflows": []string{"wf1", "wf2"}}
	clients := []oauthtest.Client{{ID: "alice", Secret: "alice-secret", Claims: claims}, {ID: "bare", Secret: "bare-secret"},
		{ID: "root", Secret: "root-secret", Claims: map[string]any{"principal_class": "admin"}}}
	idp := oauthtest.Start(t, oauthtest.Options{Clients: clients})
	forger := oauthtest.Start(t, oauthtest.Options{Clients: clients})
	cfg := config.IdentityProvider{Issuer: idp.Issuer, Audience: "mcpready-agent", JWKSURL: idp.JWKSURL(), PrincipalClasses: []string{"developer"}}
	v := NewIdentityVerifier(cfg, nil, nil)
	id, err := v.Authenticate(context.Background(), idpToken(t, idp, "alice", "mcpready-agent"))
	if err != nil {
		t.Fatal(err)
	}
	if id.Name != "idp:alice" || id.PrincipalClass != "developer" || id.TenantClass != "acme" || !slices.Equal(id.Workflows, []string{"wf1", "wf2"}) {
		t.Fatalf("identity = %+v", id)
	}
	short := oauthtest.Start(t, oauthtest.Options{Clients: clients, Lifetime: time.Millisecond})
	cases := map[string]struct {
		v   *IdentityVerifier
		tok string
	}{
		"forged (other keys)":   {v, idpToken(t, forger, "alice", "mcpready-agent")},
		"wrong audience":        {v, idpToken(t, idp, "alice", "other-agent")},
		"no principal class":    {v, idpToken(t, idp, "bare", "mcpready-agent")},
		"class not permitted":   {v, idpToken(t, idp, "root", "mcpready-agent")},
		"expired":               {NewIdentityVerifier(config.IdentityProvider{Issuer: short.Issuer, Audience: "mcpready-agent", JWKSURL: short.JWKSURL()}, nil, nil), idpToken(t, short, "alice", "mcpready-agent")},
		"not a JWT":             {v, "a.b.c"},
		"issuer claims another": {NewIdentityVerifier(config.IdentityProvider{Issuer: "https://idp.example", Audience: "mcpready-agent", JWKSURL: idp.JWKSURL()}, nil, nil), idpToken(t, idp, "alice", "mcpready-agent")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			time.Sleep(2 * time.Millisecond)
			_, err := tc.v.Authenticate(context.Background(), tc.tok)
			if !errors.Is(err, ErrLocalIdentity) || !errors.Is(err, config.ErrUnauthenticated) {
				t.Fatalf("err = %v, want ErrLocalIdentity", err)
			}
		})
	}
}

// FuzzIdentityOf: any claims of a verified token map to an identity with a
// principal class, or to ErrLocalIdentity; never a panic.
func FuzzIdentityOf(f *testing.F) {
	f.Add(`{"principal_class":"developer","tenant_class":"acme","workflows":["a","b"]}`, "alice", "mcpready-agent")
	f.Add(`{"principal_class":7,"workflows":"a b"}`, "", "x")
	f.Add(`{"workflows":[1,2]}`, "bob", "mcpready-agent")
	idp := &config.IdentityProvider{Issuer: "https://idp.example", Audience: "mcpready-agent", JWKSURL: "https://idp.example/keys"}
	now := time.Unix(1_800_000_000, 0)
	f.Fuzz(func(t *testing.T, extra, sub, aud string) {
		var m map[string]any
		if json.Unmarshal([]byte(extra), &m) != nil {
			return
		}
		vi, err := identityOf(&Claims{Issuer: idp.Issuer, Subject: sub, Audience: []string{aud}, Expiry: now.Add(time.Hour), Extra: m}, idp, now)
		switch {
		case err != nil && !errors.Is(err, ErrLocalIdentity):
			t.Fatalf("untyped error %v", err)
		case err == nil && (vi.id.PrincipalClass == "" || sub == "" || aud != idp.Audience):
			t.Fatalf("accepted %+v", vi.id)
		}
	})
}
