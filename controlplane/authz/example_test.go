package authz_test

import (
	"fmt"

	"github.com/mcpready/mcpready/controlplane/authz"
)

// The --authz and --node-labels flags take one rule each: which
// certificate identities hold a role, and which node-label values they
// may claim. A rule that does not parse stops the control plane at start.
func ExampleParseRule() {
	r, err := authz.ParseRule("spiffe://example.org/agent/*=agent")
	fmt.Println(r.Match, r.Role, err)
	l, err := authz.ParseLabelRule("spiffe://example.org/agent/eu-*=region:eu-west-1|eu-central-1;tenant-class:internal")
	fmt.Println(l.Match, l.Labels["region"], l.Labels["tenant-class"], err)
	_, err = authz.ParseRule("spiffe://example.org/agent/*=superuser")
	fmt.Println(err)
	// Output:
	// spiffe://example.org/agent/* agent <nil>
	// spiffe://example.org/agent/eu-* [eu-west-1 eu-central-1] [internal] <nil>
	// authz: bad configuration: unknown role "superuser" (want admin, agent or reader)
}
