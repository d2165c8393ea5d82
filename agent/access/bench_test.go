package access

import (
	"context"
	"fmt"
	"testing"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/internal/oauthtest"
	"golang.org/x/oauth2/clientcredentials"
)

// BenchmarkTokenExchangeMiss: a token-cache miss under token exchange, a
// new principal each op: one RFC 8693 exchange at a real (loopback)
// authorization server and the JWT's verification against its cached
// JWKS; discovery is cached.
func BenchmarkTokenExchangeMiss(b *testing.B) {
	as := oauthtest.Start(b, oauthtest.Options{Clients: []oauthtest.Client{
		{ID: "alice", Secret: "alice-secret"}, {ID: "agent", Secret: "agent-secret", TokenExchange: true}}})
	o := config.OAuth{Grant: config.GrantTokenExchange, ClientID: "agent", ClientSecretFile: secretFile(b, "agent-secret"), Scopes: []string{"read"}, Issuer: as.Issuer}
	r := newRig(b, as, oauthtest.Resource{}, o)
	cc := clientcredentials.Config{ClientID: "alice", ClientSecret: "alice-secret", TokenURL: as.TokenEndpoint(), Scopes: []string{"read"}}
	own, err := cc.Token(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	c := New(Options{})
	if _, err := c.Token(context.Background(), Principal{Name: "warm", SubjectToken: own.AccessToken}, &r.upstream); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Token(context.Background(), Principal{Name: fmt.Sprint("p", i), SubjectToken: own.AccessToken}, &r.upstream); err != nil {
			b.Fatal(err)
		}
	}
}
