package front

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/mcpready/mcpready/agent/access"
	"github.com/mcpready/mcpready/agent/config"
)

// upstreamAccess is the access client of the configuration's OAuth
// upstreams (nil when none has oauth) and their lookup by server name.
// Authorization-code flows log their authorization URL to log.
func upstreamAccess(cfg *config.Config, log *slog.Logger) (*access.Client, func(server string) (*access.Upstream, bool)) {
	ups := map[string]*access.Upstream{}
	for _, u := range cfg.Upstreams() {
		if u.OAuth != nil {
			ups[u.Name] = &access.Upstream{Name: u.Name, URL: u.URL, OAuth: *u.OAuth}
		}
	}
	if len(ups) == 0 {
		return nil, nil
	}
	return access.New(access.Options{Authorizer: access.LoopbackAuthorizer(log)}), func(server string) (*access.Upstream, bool) {
		u, ok := ups[server]
		return u, ok
	}
}

// identityProvider is the verifier of the configured identity provider's
// JWTs, nil when none is configured.
func identityProvider(cfg *config.Config) *access.IdentityVerifier {
	idp := cfg.IdentityProvider()
	if idp == nil {
		return nil
	}
	return access.NewIdentityVerifier(*idp, nil, nil)
}

// idpTimeout bounds fetching the identity provider's keys for one request.
const idpTimeout = 5 * time.Second

// authenticateJWT maps tok, a JWT of the identity provider, to its
// identity; its principal class decides whether it may report workflows
// (identityProvider.workflowReporters).
func (f *Front) authenticateJWT(tok string) (config.Identity, error) {
	ctx, cancel := context.WithTimeout(context.Background(), idpTimeout)
	defer cancel()
	id, err := f.idp.Authenticate(ctx, tok)
	if err == nil {
		id.ReportWorkflows = f.opts.Config.IdentityProvider().ReportsWorkflows(id.PrincipalClass)
	}
	return id, err
}

// subjectToken is the caller's own identity-provider token, exchanged for
// upstream tokens on its behalf; "" unless id was authenticated by it.
func (f *Front) subjectToken(h http.Header, id config.Identity) string {
	if f.idp == nil || !strings.HasPrefix(id.Name, access.IdentityPrefix) {
		return ""
	}
	return bearerOf(h)
}

// accessContext makes a dedicated upstream session of s, which only s's
// principal uses, present that principal's upstream tokens from its
// initialize on (an upstream binds a session to the user that opened it).
// Called with s.mu held.
func (s *session) accessContext(ctx context.Context) context.Context {
	if s.access == (access.Principal{}) {
		return ctx
	}
	return access.WithPrincipal(ctx, s.access)
}
