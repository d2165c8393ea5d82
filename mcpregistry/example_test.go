package mcpregistry_test

import (
	"fmt"

	"github.com/mcpready/mcpready/mcpregistry"
)

// Drafts turns registry records into unsigned CANDIDATE RegistryEntry
// drafts, one per Streamable HTTP remote; a record that ships only
// packages gives none. A platform team reviews, enrolls and signs them.
func ExampleDrafts() {
	records := []mcpregistry.Record{
		{Server: mcpregistry.Server{Name: "io.example/docs", Version: "1.4.0",
			Remotes: []mcpregistry.Remote{{Type: "streamable-http", URL: "https://docs.example/mcp"}}},
			Official: mcpregistry.Official{Status: "active", IsLatest: true}, HasOfficial: true},
		{Server: mcpregistry.Server{Name: "io.example/local-only", Version: "0.3.0",
			Packages: []mcpregistry.Package{{}}}},
	}
	for _, d := range mcpregistry.Drafts("https://registry.modelcontextprotocol.io", records) {
		y, err := d.YAML()
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Print(string(y))
	}
	// Output:
	// apiVersion: mcpready.dev/v1
	// kind: RegistryEntry
	// metadata:
	//   labels:
	//     mcpready.dev/publisher-metadata: absent
	//     mcpready.dev/publisher-verification: domain
	//     mcpready.dev/registry-record-version: 1.4.0
	//     mcpready.dev/registry-status: active
	//   name: imported/io.example/docs@1.4.0
	// spec:
	//   discoverySource: mcp-registry:https://registry.modelcontextprotocol.io/v0/servers/io.example%2Fdocs/versions/1.4.0
	//   identity:
	//     endpoint: https://docs.example/mcp
	//     serverName: io.example/docs
	//     serverVersion: 1.4.0
	//   provenance:
	//     issuer: mcp-registry-import
	//     sourceUri: https://registry.modelcontextprotocol.io/v0/servers/io.example%2Fdocs/versions/1.4.0
	//   state: LIFECYCLE_STATE_CANDIDATE
}
