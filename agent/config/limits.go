package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ErrLimit wraps a limits setting outside its range (it also wraps ErrInvalid).
var ErrLimit = fmt.Errorf("%w: limits", ErrInvalid)

// Duration is a length of time written as a Go duration string ("10s",
// "2m", "1h30m"), as kubectl and Envoy settings are.
type Duration time.Duration

// UnmarshalJSON reads a duration string; a number is refused (its unit
// would be a guess).
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New(`a duration is a string such as "10s" or "2m"`)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes the duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// Limits are the agent's bounds on what local clients may hold open and
// how long it waits for them. Every field's zero value (or its absence)
// is the default named in its comment; a value outside the field's range
// is refused (ErrLimit). Counts range over 1..MaxLimitCount; durations
// over the minimum named per field up to MaxLimitDuration.
type Limits struct {
	// Sessions caps the stateful MCP sessions local clients hold with the
	// agent at once over all principals; 0 is 4096. A request that would
	// open one past it is refused (HTTP 503, too many sessions).
	Sessions int `json:"sessions,omitempty"`
	// SessionsPerPrincipal is the same cap per principal (the default
	// principal included); 0 is 256.
	SessionsPerPrincipal int `json:"sessionsPerPrincipal,omitempty"`
	// CallsInProgress caps the tool calls and other upstream requests
	// (resources, prompts, completion) the agent runs for clients at once
	// over all principals; 0 is 4096. One past it is refused before any
	// upstream (agent_capacity).
	CallsInProgress int `json:"callsInProgress,omitempty"`
	// CallsInProgressPerPrincipal is the same cap per principal; 0 is 256.
	CallsInProgressPerPrincipal int `json:"callsInProgressPerPrincipal,omitempty"`
	// UpstreamSessions caps the dedicated upstream sessions (for a stdio
	// upstream, child processes) the transparent views hold at once over
	// all principals; 0 is 256. An initialize past it is refused (too
	// many upstream sessions).
	UpstreamSessions int `json:"upstreamSessions,omitempty"`
	// UpstreamSessionsPerPrincipal is the same cap per principal (the
	// default principal included); 0 is 64.
	UpstreamSessionsPerPrincipal int `json:"upstreamSessionsPerPrincipal,omitempty"`
	// HeldCalls and HeldCallsPerPrincipal cap the upstream calls held open
	// across input rounds for stateless clients; 0 is 256 and 16.
	HeldCalls             int `json:"heldCalls,omitempty"`
	HeldCallsPerPrincipal int `json:"heldCallsPerPrincipal,omitempty"`
	// PendingRounds and PendingRoundsPerPrincipal cap the input rounds
	// waiting for a stateless client's answer; 0 is 10000 and 64.
	PendingRounds             int `json:"pendingRounds,omitempty"`
	PendingRoundsPerPrincipal int `json:"pendingRoundsPerPrincipal,omitempty"`
	// IdempotencyKeys and IdempotencyKeysPerCaller cap the live
	// idempotency key bindings overall and per caller (one principal of a
	// tenant class and principal class); 0 is 250000 and 100000. A call with a new key
	// past them is refused (idempotency_store_unavailable); bindings
	// expire after their retention.
	IdempotencyKeys          int `json:"idempotencyKeys,omitempty"`
	IdempotencyKeysPerCaller int `json:"idempotencyKeysPerCaller,omitempty"`
	// ReadHeaderTimeout bounds reading a request's headers; 0 is 10s, at least 1s.
	ReadHeaderTimeout Duration `json:"readHeaderTimeout,omitempty"`
	// IdleTimeout closes a keep-alive connection idle between requests; 0 is 2m, at least 1s.
	IdleTimeout Duration `json:"idleTimeout,omitempty"`
	// BodyTimeout answers 408 to a request body not read in time; 0 is 30s, at least 1s.
	BodyTimeout Duration `json:"bodyTimeout,omitempty"`
	// SessionIdleTimeout closes a front session (and its dedicated
	// upstream sessions) without a request for this long; 0 is 30m, at least 1s.
	SessionIdleTimeout Duration `json:"sessionIdleTimeout,omitempty"`
	// ColdAfter is how long an upstream session may sit idle before its
	// next call is recorded cold (Receipt.warmth); 0 is 1m, at least 10ms.
	ColdAfter Duration `json:"coldAfter,omitempty"`
	// RelistInterval is how often every upstream's tools are listed again
	// and checked against their pins (for upstreams that change without
	// notifying); 0 is 5m, at least 10s.
	RelistInterval Duration `json:"relistInterval,omitempty"`
	// Workflows bounds workflow tracking.
	Workflows WorkflowLimits `json:"workflows,omitempty"`
}

// WorkflowLimits bound the workflows the agent tracks (agent/workflow).
type WorkflowLimits struct {
	// Open and OpenPerPrincipal cap the open workflows overall and per
	// principal; 0 is 10000 and 256. A call opening one past them is
	// refused (workflow_limit).
	Open             int `json:"open,omitempty"`
	OpenPerPrincipal int `json:"openPerPrincipal,omitempty"`
	// CallsPerWorkflow is how many calls one workflow lists (later ones
	// are counted only); 0 is 512.
	CallsPerWorkflow int `json:"callsPerWorkflow,omitempty"`
	// Calls is how many calls all open workflows list together; 0 is 65536.
	Calls int `json:"calls,omitempty"`
	// IdleTimeout records a workflow abandoned (expired) after this long
	// without a call or a report; 0 is 1h, at least 1s.
	IdleTimeout Duration `json:"idleTimeout,omitempty"`
}

// Bounds of every Limits field.
const (
	MaxLimitCount    = 1_000_000
	MaxLimitDuration = 7 * 24 * time.Hour
)

func (l Limits) validate() error {
	for _, c := range []struct {
		name string
		v    int
	}{
		{"sessions", l.Sessions}, {"sessionsPerPrincipal", l.SessionsPerPrincipal},
		{"callsInProgress", l.CallsInProgress}, {"callsInProgressPerPrincipal", l.CallsInProgressPerPrincipal},
		{"upstreamSessions", l.UpstreamSessions}, {"upstreamSessionsPerPrincipal", l.UpstreamSessionsPerPrincipal},
		{"heldCalls", l.HeldCalls}, {"heldCallsPerPrincipal", l.HeldCallsPerPrincipal},
		{"pendingRounds", l.PendingRounds}, {"pendingRoundsPerPrincipal", l.PendingRoundsPerPrincipal},
		{"idempotencyKeys", l.IdempotencyKeys}, {"idempotencyKeysPerCaller", l.IdempotencyKeysPerCaller},
		{"workflows.open", l.Workflows.Open}, {"workflows.openPerPrincipal", l.Workflows.OpenPerPrincipal},
		{"workflows.callsPerWorkflow", l.Workflows.CallsPerWorkflow}, {"workflows.calls", l.Workflows.Calls},
	} {
		if c.v < 0 || c.v > MaxLimitCount {
			return fmt.Errorf("%w.%s %d: want 1 to %d (0 or absent: the default)", ErrLimit, c.name, c.v, MaxLimitCount)
		}
	}
	for _, d := range []struct {
		name string
		v    Duration
		min  time.Duration
	}{
		{"readHeaderTimeout", l.ReadHeaderTimeout, time.Second}, {"idleTimeout", l.IdleTimeout, time.Second},
		{"bodyTimeout", l.BodyTimeout, time.Second}, {"sessionIdleTimeout", l.SessionIdleTimeout, time.Second},
		{"coldAfter", l.ColdAfter, 10 * time.Millisecond}, {"relistInterval", l.RelistInterval, 10 * time.Second},
		{"workflows.idleTimeout", l.Workflows.IdleTimeout, time.Second},
	} {
		if v := time.Duration(d.v); v != 0 && (v < d.min || v > MaxLimitDuration) {
			return fmt.Errorf("%w.%s %s: want %s to %s (0 or absent: the default)", ErrLimit, d.name, v, d.min, MaxLimitDuration)
		}
	}
	return nil
}

// Limits returns the configured limits (the zero Limits when none are set).
func (c *Config) Limits() Limits { return c.file.Limits }
