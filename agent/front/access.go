package front

import (
	"github.com/mcpready/mcpready/agent/access"
	"github.com/mcpready/mcpready/agent/config"
)

// upstreamAccess is the access client of the configuration's OAuth
// upstreams (nil when none has oauth) and their lookup by server name.
func upstreamAccess(cfg *config.Config) (*access.Client, func(server string) (*access.Upstream, bool)) {
	ups := map[string]*access.Upstream{}
	for _, u := range cfg.Upstreams() {
		if u.OAuth != nil {
			ups[u.Name] = &access.Upstream{Name: u.Name, URL: u.URL, OAuth: *u.OAuth}
		}
	}
	if len(ups) == 0 {
		return nil, nil
	}
	return access.New(access.Options{}), func(server string) (*access.Upstream, bool) {
		u, ok := ups[server]
		return u, ok
	}
}
