package artifact_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// Evidence whose top-level condition and subject name different values
// holds for no call (agent/decide): it is refused at apply, naming both,
// rather than stored to count for nothing.
func TestEvidenceConditionsAgree(t *testing.T) {
	sub := func() *mcpreadyv1.Subject { return &mcpreadyv1.Subject{ServerName: "s", ToolName: "t"} }
	for name, tc := range map[string]struct {
		ev   *mcpreadyv1.Evidence
		want string
	}{
		"agree":           {&mcpreadyv1.Evidence{Region: "eu", PrincipalClass: "dev", Subject: &mcpreadyv1.Subject{Region: "eu", PrincipalClass: "dev"}}, ""},
		"one side set":    {&mcpreadyv1.Evidence{TenantClass: "acme", Subject: sub()}, ""},
		"regions":         {&mcpreadyv1.Evidence{Region: "eu", Subject: &mcpreadyv1.Subject{Region: "us"}}, `region "eu" and subject.region "us"`},
		"principals":      {&mcpreadyv1.Evidence{PrincipalClass: "dev", Subject: &mcpreadyv1.Subject{PrincipalClass: "ops"}}, `principalClass "dev" and subject.principalClass "ops"`},
		"tenants":         {&mcpreadyv1.Evidence{TenantClass: "a", Subject: &mcpreadyv1.Subject{TenantClass: "b"}}, `tenantClass "a" and subject.tenantClass "b"`},
		"protocol lists":  {&mcpreadyv1.Evidence{ProtocolVersion: "2025-11-25", Subject: &mcpreadyv1.Subject{ProtocolVersions: []string{"2025-06-18"}}}, `protocolVersion "2025-11-25" is not in subject.protocolVersions`},
		"protocol in":     {&mcpreadyv1.Evidence{ProtocolVersion: "2025-11-25", Subject: &mcpreadyv1.Subject{ProtocolVersions: []string{"2025-11-25"}}}, ""},
		"keyless":         {&mcpreadyv1.Evidence{AuthClass: "keyless", Subject: sub()}, ""},
		"oauth grant":     {&mcpreadyv1.Evidence{AuthClass: "oauth:token_exchange", Subject: sub()}, ""},
		"auth none":       {&mcpreadyv1.Evidence{AuthClass: "none", Subject: sub()}, `authClass "none" is not an auth class`},
		"unknown grant":   {&mcpreadyv1.Evidence{AuthClass: "oauth:password", Subject: sub()}, `authClass "oauth:password"`},
		"input class":     {&mcpreadyv1.Evidence{Subject: &mcpreadyv1.Subject{ServerName: "s", ToolName: "t", InputClass: "bulk"}}, ""},
		"bad input class": {&mcpreadyv1.Evidence{Subject: &mcpreadyv1.Subject{ServerName: "s", ToolName: "t", InputClass: "Bulk Calls"}}, `subject.inputClass "Bulk Calls"`},
	} {
		err := artifact.New(artifact.KindEvidence, "ev", tc.ev).Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case tc.want != "" && (!errors.Is(err, artifact.ErrInvalid) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want ErrInvalid naming %s", name, err, tc.want)
		}
	}
}

// A Policy names the evidence methods it accepts by their enum names.
func TestAcceptedMethodsParse(t *testing.T) {
	o, err := artifact.Parse([]byte(`apiVersion: mcpready.dev/v1
kind: Policy
metadata: {name: p}
spec:
  evidence:
    acceptedMethods: [EVIDENCE_METHOD_PASSIVE, EVIDENCE_METHOD_MIXED]
`))
	if err != nil {
		t.Fatal(err)
	}
	got := o.Spec.(*mcpreadyv1.Policy).GetEvidence().GetAcceptedMethods()
	if len(got) != 2 || got[0] != mcpreadyv1.EvidenceMethod_EVIDENCE_METHOD_PASSIVE || got[1] != mcpreadyv1.EvidenceMethod_EVIDENCE_METHOD_MIXED {
		t.Fatalf("acceptedMethods %v", got)
	}
}

// A clientRequests rule names a server pattern and only the three requests
// an upstream can send towards a client (or "*"); anything else is refused
// at apply rather than granting nothing silently.
func TestClientRequestRulesChecked(t *testing.T) {
	for name, tc := range map[string]struct {
		rule *mcpreadyv1.ClientRequestRule
		want string
	}{
		"ok":             {&mcpreadyv1.ClientRequestRule{Server: "com.example/*", Allow: []string{"sampling/createMessage", "elicitation/create", "roots/list"}}, ""},
		"star":           {&mcpreadyv1.ClientRequestRule{Server: "*", PrincipalClasses: []string{"dev"}, Allow: []string{"*"}}, ""},
		"deny all":       {&mcpreadyv1.ClientRequestRule{Server: "*"}, ""},
		"no server":      {&mcpreadyv1.ClientRequestRule{Allow: []string{"roots/list"}}, "clientRequests[0].server: an empty pattern"},
		"unknown method": {&mcpreadyv1.ClientRequestRule{Server: "*", Allow: []string{"tools/call"}}, `clientRequests[0].allow: "tools/call" is not a request towards the client`},
		"empty class":    {&mcpreadyv1.ClientRequestRule{Server: "*", PrincipalClasses: []string{""}}, "clientRequests[0].principalClasses: an empty pattern"},
	} {
		err := artifact.New(artifact.KindPolicy, "p", &mcpreadyv1.Policy{ClientRequests: []*mcpreadyv1.ClientRequestRule{tc.rule}}).Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case tc.want != "" && (!errors.Is(err, artifact.ErrInvalid) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want ErrInvalid naming %s", name, err, tc.want)
		}
	}
}
