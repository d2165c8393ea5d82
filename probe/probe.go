// Package probe runs the layered readiness funnel against one MCP endpoint:
// registry presence (when a lookup is given), reachability (DNS, connect,
// TLS identity, HTTP), protocol compatibility in both eras separately
// (server/discover for 2026-07-28, initialize for 2025-11-25), listing
// (every page, partial coverage recorded), access (401 with RFC 9728
// metadata fetched and checked, 402 billing, a foreign issuer named), a
// safe invocation of one tool the consumer classifies read-only, result
// validity, and cold and warm latency.
//
// Every layer has its own status and reason; a failure stops the layers
// above it (they are reported as not reached), and nothing is collapsed
// into a score. It must not call a tool the consumer has not classified
// read-only, follow a redirect to another origin, or keep response bodies
// or upstream error text in its report beyond a bounded, classified reason.
package probe

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/loopback"
	"github.com/mcpready/mcpready/readiness"
)

// Layer is one layer of the funnel, in the order of the readiness model.
type Layer string

// The layers, lowest first.
const (
	LayerRegistry     Layer = "registry"
	LayerReachability Layer = "reachability"
	LayerProtocol     Layer = "protocol"
	LayerAccess       Layer = "access"
	LayerListing      Layer = "listing"
	LayerInvocation   Layer = "invocation"
	LayerResult       Layer = "result"
)

// Layers lists every layer in funnel order.
func Layers() []Layer {
	return []Layer{LayerRegistry, LayerReachability, LayerProtocol, LayerAccess, LayerListing, LayerInvocation, LayerResult}
}

// Status is a layer's outcome.
type Status string

// The statuses.
const (
	// Ready: the layer was measured and holds.
	Ready Status = "ready"
	// NotReady: the layer was measured and does not hold; Reason says why.
	NotReady Status = "not-ready"
	// NotReached: a lower layer is not ready, so this one says nothing.
	NotReached Status = "not-reached"
	// Skipped: the probe was not asked to, or could not safely, measure it
	// (no registry lookup, no tool the consumer classifies read-only).
	Skipped Status = "skipped"
)

// Result is one layer's outcome.
type Result struct {
	Layer  Layer  `json:"layer"`
	Status Status `json:"status"`
	// Reason is a stable, classified code (e.g. "dns", "tls-identity",
	// "auth-required", "billing", "foreign-issuer", "empty-arguments-rejected").
	Reason string `json:"reason,omitempty"`
	// Detail is a short explanation written by the probe, never text the
	// endpoint sent.
	Detail string `json:"detail,omitempty"`
}

// Era is one protocol era's outcome.
type Era struct {
	// Requested is the protocol version asked for.
	Requested string `json:"requested"`
	// Negotiated is the version the server answered with; "" when the
	// era did not work.
	Negotiated string `json:"negotiated,omitempty"`
	OK         bool   `json:"ok"`
	Reason     string `json:"reason,omitempty"`
}

// Report is what one probe run measured.
type Report struct {
	URL       string    `json:"url"`
	Server    string    `json:"server,omitempty"`
	StartedAt time.Time `json:"startedAt"`
	Layers    []Result  `json:"layers"`
	// ServerVersion and ProtocolVersion are what the server answered in the
	// era used for the layers above protocol.
	ServerVersion   string `json:"serverVersion,omitempty"`
	ProtocolVersion string `json:"protocolVersion,omitempty"`
	// Eras records the two protocol eras separately.
	Eras []Era `json:"eras,omitempty"`
	// Tools and Pages count what the listing read; Partial is set when the
	// listing stopped before its end (page limit, repeated cursor, error).
	Tools   int  `json:"tools"`
	Pages   int  `json:"pages"`
	Partial bool `json:"partial,omitempty"`
	// HTTPStatus is the status of the first MCP request.
	HTTPStatus int `json:"httpStatus,omitempty"`
	// Issuers are the authorization servers a 401's protected-resource
	// metadata names.
	Issuers []string `json:"issuers,omitempty"`
	// ProbedTool is the tool invoked, if any, and the digests that pin its
	// definition as agents pin it (agent/pin: the Evidence's subject names
	// them, so it counts for the registry entries that pin the same
	// definition).
	ProbedTool         string `json:"probedTool,omitempty"`
	InputSchemaDigest  string `json:"inputSchemaDigest,omitempty"`
	OutputSchemaDigest string `json:"outputSchemaDigest,omitempty"`
	// RegistryRecordVersion is the probed tool's registry record version
	// (Options.RecordVersions), when known.
	RegistryRecordVersion string `json:"registryRecordVersion,omitempty"`
	// DriftObserved names how the probed tool's definition changed while
	// the probe watched (its later listings on the open session), as an
	// agent's pin names it: INPUT_SCHEMA_DRIFT, OUTPUT_SCHEMA_DRIFT,
	// DEFINITION_DRIFT, SIDE_EFFECT_DRIFT (the annotations' hints). The
	// Evidence then reports it and counts for no call.
	DriftObserved []string `json:"driftObserved,omitempty"`
	// InputClass is the input class of the canary call's arguments
	// (Options.InputClass; the arguments themselves are never in the
	// report).
	InputClass string `json:"inputClass,omitempty"`
	// Cold is the first successful connection (handshake and first
	// answer); Warm the median of the later calls on the open session.
	Cold time.Duration `json:"coldNs,omitempty"`
	Warm time.Duration `json:"warmNs,omitempty"`
	// BearerPresented says whether a bearer token was presented (the token
	// itself is never in the report).
	BearerPresented bool `json:"bearerPresented,omitempty"`
	// AuthClass is how the probe authenticated (readiness's auth classes):
	// keyless, bearer-token (Options.Token) or Options.Credential's class.
	AuthClass string `json:"authClass"`
	// Took is the whole run.
	Took time.Duration `json:"tookNs"`
	// BlindSpots say what this probe cannot speak for.
	BlindSpots []string `json:"blindSpots,omitempty"`
}

// Layer returns the result of layer l.
func (r *Report) Layer(l Layer) Result {
	for _, x := range r.Layers {
		if x.Layer == l {
			return x
		}
	}
	return Result{Layer: l, Status: NotReached}
}

// Ready reports whether every measured layer is ready (skipped layers do
// not count either way).
func (r *Report) Ready() bool {
	for _, x := range r.Layers {
		if x.Status == NotReady || x.Status == NotReached {
			return false
		}
	}
	return true
}

// Options configure a probe run. The zero value probes keylessly with a
// 10 s budget per step, reads at most 100 listing pages and invokes
// nothing.
type Options struct {
	// Server is the expected server name (reported, and used for the
	// registry lookup).
	Server string
	// Registered, when set, answers registry presence for Server.
	// Zero: the registry layer is skipped.
	Registered func(ctx context.Context, server string) (bool, error)
	// ReadOnly lists the tools the consumer classifies read-only; only
	// these may be invoked. Zero: nothing is invoked.
	ReadOnly []string
	// Token, when set, is presented as a bearer token. Zero: keyless.
	Token string
	// Credential, when set, presents a credential the caller obtains (an
	// OAuth client's tokens, as the agent gets them) instead of Token; at
	// most one of the two. Zero: none.
	Credential *Credential
	// ExpectedIssuers, when set, are the authorization servers the consumer
	// accepts; a 401 naming none of them is a foreign issuer. Zero: any
	// issuer the metadata names is recorded, none is foreign.
	ExpectedIssuers []string
	// TLS configures TLS to the endpoint (roots, client certificate).
	// Zero: the system roots; the server name is the URL's host.
	TLS *tls.Config
	// StepTimeout bounds each network step. Zero: 10 s.
	StepTimeout time.Duration
	// MaxPages bounds the listing. Zero: 100.
	MaxPages int
	// WarmCalls is the number of extra listings timed on the open session
	// for the warm latency. Zero: 3.
	WarmCalls int
	// Arguments are the canary call's arguments. Zero: arguments built
	// from the tool's input schema (ExampleArguments), the smallest valid
	// input.
	Arguments map[string]any
	// InputClass is the input class (Policy.inputClasses) Arguments are
	// in, stated in the report and the Evidence so that it counts for
	// calls in that class. It needs Arguments and a name the Policy would
	// accept (ErrInputClass otherwise). Zero: none, so the Evidence counts
	// for calls in no class.
	InputClass string
	// RecordVersions maps a tool's name to the registry record version
	// (its RegistryEntry's provenance.version) at this endpoint. The probed
	// tool's is stated in the report and the Evidence
	// (subject.registryRecordVersion), so the Evidence counts only for that
	// record and not for a later one. Zero: none stated; the Evidence then
	// counts for any record of the entry it otherwise matches.
	RecordVersions map[string]string
}

func (o *Options) defaults() {
	if o.StepTimeout <= 0 {
		o.StepTimeout = 10 * time.Second
	}
	if o.MaxPages <= 0 {
		o.MaxPages = 100
	}
	if o.WarmCalls <= 0 {
		o.WarmCalls = 3
	}
}

// Credential is a credential presented through the caller's transport,
// e.g. agent/access's, which obtains, refreshes and presents an upstream's
// OAuth tokens as the agent does.
type Credential struct {
	// Transport wraps base so that the requests it carries present the
	// credential. The probe sends it only requests for the endpoint's
	// origin (metadata elsewhere is fetched without it).
	Transport func(base http.RoundTripper) http.RoundTripper
	// AuthClass is the auth class of calls made with the credential
	// (readiness.AuthOAuth of its grant): the Evidence states it, so that
	// it counts for the agents' calls made the same way. It must be an auth
	// class that presents a credential.
	AuthClass string
}

// maxTokenFile bounds a token file.
const maxTokenFile = 64 << 10

// ErrNoToken is a token file that holds no token.
var ErrNoToken = errors.New("probe: no token in the file")

// ReadToken reads a bearer token file for Options.Token: at most 64 KiB,
// the token without surrounding white space; an empty file is ErrNoToken
// (a probe that meant to present a token must not run keyless). Its
// errors never quote the content.
func ReadToken(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	switch {
	case err != nil:
		return "", err
	case len(b) > maxTokenFile:
		return "", fmt.Errorf("probe: %s is over %d bytes", path, maxTokenFile)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("%w %s", ErrNoToken, path)
	}
	return tok, nil
}

// ErrURL is returned for an endpoint URL that cannot be probed.
var ErrURL = errors.New("probe: bad endpoint URL")

// ErrCredential is returned for Options.Credential without a transport or
// a credential-bearing auth class, or together with Options.Token.
var ErrCredential = errors.New("probe: bad credential")

// ErrInputClass is returned for an Options.InputClass without Arguments,
// or one no Policy could define.
var ErrInputClass = errors.New("probe: bad input class")

// Run probes endpoint through the whole funnel. It returns an error only for
// a URL it cannot probe at all; everything the endpoint does is a result.
func Run(ctx context.Context, endpoint string, o Options) (*Report, error) {
	o.defaults()
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: %q is not an http(s) URL", ErrURL, endpoint)
	}
	auth, err := o.authClass()
	if err != nil {
		return nil, err
	}
	switch {
	case auth != readiness.AuthKeyless && !loopback.Confidential(u):
		return nil, fmt.Errorf("%w: %q must be https: a token is presented to it (plain http on a loopback address only)", ErrURL, u.Redacted())
	case o.InputClass != "" && o.Arguments == nil:
		return nil, fmt.Errorf("%w: %q states the class of arguments, and none are given", ErrInputClass, o.InputClass)
	case o.InputClass != "" && !artifact.ValidInputClass(o.InputClass):
		return nil, fmt.Errorf("%w: %q is not %s", ErrInputClass, o.InputClass, artifact.InputClassNames)
	}
	r := &Report{URL: endpoint, Server: o.Server, StartedAt: time.Now().UTC(), BearerPresented: auth != readiness.AuthKeyless,
		AuthClass: auth, InputClass: o.InputClass}
	if auth == readiness.AuthKeyless {
		r.BlindSpots = append(r.BlindSpots, "keyless probe: says nothing about authorised use")
	}
	if len(o.ReadOnly) == 0 {
		r.BlindSpots = append(r.BlindSpots, "no tool classified read-only by the consumer: invocation and result not measured")
	}
	r.BlindSpots = append(r.BlindSpots, "one vantage point, one moment: not availability")
	p := &run{o: o, u: u, r: r}
	p.funnel(ctx)
	p.order()
	r.Took = time.Since(r.StartedAt)
	return r, nil
}

// authClass is the auth class o's probe calls under.
func (o *Options) authClass() (string, error) {
	c := o.Credential
	switch {
	case c == nil && o.Token != "":
		return readiness.AuthBearer, nil
	case c == nil:
		return readiness.AuthKeyless, nil
	case o.Token != "":
		return "", fmt.Errorf("%w: set Token or Credential, not both", ErrCredential)
	case c.Transport == nil:
		return "", fmt.Errorf("%w: no transport", ErrCredential)
	case !readiness.IsAuthClass(c.AuthClass) || c.AuthClass == readiness.AuthKeyless || c.AuthClass == readiness.AuthStdio:
		return "", fmt.Errorf("%w: %q is not an auth class that presents a credential", ErrCredential, c.AuthClass)
	}
	return c.AuthClass, nil
}

type run struct {
	o      Options
	u      *url.URL
	r      *Report
	client *http.Client
	// pinned: the probed tool as first listed, pinned as an agent would
	// pin it (nil when its definition could not be digested), for the
	// drift the later listings show.
	pinned *mcpreadyv1.RegistryEntry
}

func (p *run) add(l Layer, s Status, reason, detail string) bool {
	p.r.Layers = append(p.r.Layers, Result{Layer: l, Status: s, Reason: reason, Detail: detail})
	return s == Ready || s == Skipped
}

// notReached records every layer from l on that has no result yet as not
// reached.
func (p *run) notReached(from Layer) {
	on := false
	for _, l := range Layers() {
		on = on || l == from
		if on && !p.has(l) {
			p.add(l, NotReached, "", "")
		}
	}
}

func (p *run) has(l Layer) bool {
	for _, x := range p.r.Layers {
		if x.Layer == l {
			return true
		}
	}
	return false
}

func (p *run) funnel(ctx context.Context) {
	p.registry(ctx)
	if !p.reach(ctx) {
		p.notReached(LayerProtocol)
		return
	}
	// The first MCP request tells access apart from protocol: a 401, 402
	// or 403 is access, whatever the protocol would have been.
	status, hdr, ok := p.firstRequest(ctx)
	if !ok {
		p.notReached(LayerProtocol)
		return
	}
	p.r.HTTPStatus = status
	if !p.access(ctx, status, hdr) {
		p.add(LayerProtocol, NotReached, "", "access is not ready")
		p.notReached(LayerListing)
		return
	}
	sess := p.protocol(ctx)
	if sess == nil {
		p.notReached(LayerListing)
		return
	}
	defer sess.Close()
	tools, ok := p.listing(ctx, sess)
	if !ok {
		p.notReached(LayerInvocation)
		return
	}
	p.invoke(ctx, sess, tools)
	p.warm(ctx, sess)
}

// order sorts the layer results into funnel order.
func (p *run) order() {
	out := make([]Result, 0, len(p.r.Layers))
	for _, l := range Layers() {
		for _, x := range p.r.Layers {
			if x.Layer == l {
				out = append(out, x)
			}
		}
	}
	p.r.Layers = out
}

func (p *run) registry(ctx context.Context) {
	if p.o.Registered == nil || p.o.Server == "" {
		p.add(LayerRegistry, Skipped, "no-lookup", "no registry lookup configured")
		return
	}
	ctx, cancel := context.WithTimeout(ctx, p.o.StepTimeout)
	defer cancel()
	ok, err := p.o.Registered(ctx, p.o.Server)
	switch {
	case err != nil:
		p.add(LayerRegistry, NotReady, "lookup-failed", "the registry lookup failed")
	case !ok:
		p.add(LayerRegistry, NotReady, "absent", "the server is not in the registry")
	default:
		p.add(LayerRegistry, Ready, "present", "")
	}
}
