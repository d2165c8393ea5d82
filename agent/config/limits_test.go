package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestLimits: the limits section is read (before: "limits" was an unknown
// field and the file was refused), durations are Go duration strings,
// absent fields stay zero (the defaults), and every value outside its
// range is refused with ErrLimit naming the field.
func TestLimits(t *testing.T) {
	c, err := Parse([]byte(`
limits:
  upstreamSessions: 8
  upstreamSessionsPerPrincipal: 1
  heldCalls: 4
  heldCallsPerPrincipal: 2
  pendingRounds: 100
  pendingRoundsPerPrincipal: 3
  idempotencyKeys: 1000
  idempotencyKeysPerCaller: 10
  readHeaderTimeout: 5s
  idleTimeout: 90s
  bodyTimeout: 1m
  sessionIdleTimeout: 10m
  coldAfter: 250ms
  relistInterval: 30s
  workflows: {open: 50, openPerPrincipal: 5, callsPerWorkflow: 7, calls: 70, idleTimeout: 2h}
`))
	if err != nil {
		t.Fatal(err)
	}
	l := c.Limits()
	want := Limits{UpstreamSessions: 8, UpstreamSessionsPerPrincipal: 1, HeldCalls: 4, HeldCallsPerPrincipal: 2, PendingRounds: 100, PendingRoundsPerPrincipal: 3,
		IdempotencyKeys: 1000, IdempotencyKeysPerCaller: 10,
		ReadHeaderTimeout: Duration(5 * time.Second), IdleTimeout: Duration(90 * time.Second), BodyTimeout: Duration(time.Minute),
		SessionIdleTimeout: Duration(10 * time.Minute), ColdAfter: Duration(250 * time.Millisecond), RelistInterval: Duration(30 * time.Second),
		Workflows: WorkflowLimits{Open: 50, OpenPerPrincipal: 5, CallsPerWorkflow: 7, Calls: 70, IdleTimeout: Duration(2 * time.Hour)}}
	if l != want {
		t.Fatalf("limits %+v, want %+v", l, want)
	}
	if c, err := Parse([]byte("limits: {}")); err != nil || c.Limits() != (Limits{}) {
		t.Fatalf("empty limits: %+v, %v", c, err)
	}
	for in, field := range map[string]string{
		"limits: {upstreamSessions: -1}":                   "limits.upstreamSessions",
		"limits: {heldCallsPerPrincipal: 1000001}":         "limits.heldCallsPerPrincipal",
		"limits: {pendingRounds: -5}":                      "limits.pendingRounds",
		"limits: {idempotencyKeys: -1}":                    "limits.idempotencyKeys",
		"limits: {idempotencyKeysPerCaller: 1000001}":      "limits.idempotencyKeysPerCaller",
		"limits: {readHeaderTimeout: 10ms}":                "limits.readHeaderTimeout",
		"limits: {idleTimeout: -1s}":                       "limits.idleTimeout",
		"limits: {bodyTimeout: 200h}":                      "limits.bodyTimeout",
		"limits: {coldAfter: 1ms}":                         "limits.coldAfter",
		"limits: {sessionIdleTimeout: 500ms}":              "limits.sessionIdleTimeout",
		"limits: {workflows: {openPerPrincipal: -1}}":      "limits.workflows.openPerPrincipal",
		"limits: {workflows: {callsPerWorkflow: 2000000}}": "limits.workflows.callsPerWorkflow",
		"limits: {workflows: {idleTimeout: 10ms}}":         "limits.workflows.idleTimeout",
		"limits: {relistInterval: 1s}":                     "limits.relistInterval",
		"limits: {workflows: {calls: -1}}":                 "limits.workflows.calls",
	} {
		_, err := Parse([]byte(in))
		if !errors.Is(err, ErrLimit) || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), field+" ") {
			t.Errorf("%s: %v, want ErrLimit naming %s", in, err, field)
		}
	}
	for _, in := range []string{"limits: {idleTimeout: 120}", "limits: {idleTimeout: soon}", "limits: {maxSessions: 1}", "limits: {workflows: {maxOpen: 1}}"} {
		if _, err := Parse([]byte(in)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", in, err)
		}
	}
}

// TestWorkflowReporters: identity-provider principals of the listed classes
// may report workflows; a class no token may claim is refused.
func TestWorkflowReporters(t *testing.T) {
	idp := "identityProvider: {issuer: https://idp.example, audience: a, jwksURL: https://idp.example/keys, principalClasses: [automation, developer], workflowReporters: "
	c, err := Parse([]byte(idp + "[automation]}"))
	if err != nil {
		t.Fatal(err)
	}
	if p := c.IdentityProvider(); !p.ReportsWorkflows("automation") || p.ReportsWorkflows("developer") || p.ReportsWorkflows("") {
		t.Fatal("workflowReporters not applied by class")
	}
	var none *IdentityProvider
	if none.ReportsWorkflows("automation") {
		t.Fatal("no identity provider reports workflows")
	}
	for _, bad := range []string{"[robots]}", `[""]}`} {
		if _, err := Parse([]byte(idp + bad)); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "workflowReporters") {
			t.Errorf("%s: %v, want a workflowReporters refusal", bad, err)
		}
	}
}
