package nodelabel_test

import (
	"fmt"

	"github.com/mcpready/mcpready/nodelabel"
)

// A certificate binds node labels as URI SANs; the control plane reads
// them back from the agent's client certificate instead of taking the
// agent's word.
func ExampleFromCertURIs() {
	sans := []string{
		"spiffe://example.org/agent/host-7", // not a node label: ignored
		nodelabel.CertURI(nodelabel.Region, "eu-west-1"),
		nodelabel.CertURI(nodelabel.TenantClass, "payments"),
	}
	fmt.Println(sans[1])
	labels, err := nodelabel.FromCertURIs(sans)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(labels[nodelabel.Region], labels[nodelabel.TenantClass])
	// Output:
	// urn:mcpready:node-label:region:eu-west-1
	// [eu-west-1] [payments]
}
