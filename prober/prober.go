// Package prober runs the probe funnel on a schedule: every round it asks
// for the endpoints to probe (the registry's entries, and the consumer's
// canaries: read-only calls with its own arguments for a Policy input
// class, see Canary), probes them with
// bounded concurrency, turns each report into signed SYNTHETIC Evidence and
// applies it. Rounds repeat at an interval derived from the Policy's
// maximum evidence age per layer (half the shortest, so evidence is renewed
// before it expires), with jitter so that a fleet of probers does not
// arrive together.
//
// Metrics (names and labels are the operator's contract, see
// docs/operator.md): probes run, funnels stopped per layer, Evidence applied
// or refused, the last round's end, and the evidence age per subject — a
// gauge of seconds since this prober last applied Evidence for a subject,
// +Inf while it has applied none since it started, the series an operator
// alerts on (age above the Policy's maximum). The subject label takes one
// value per target of the latest round (its server name, or its URL when it
// has none), and a subject no longer among the targets is dropped, so the
// series are bounded by the registry's distinct endpoints.
//
// Probes present a server's credential when one is configured: a bearer
// token file, or OAuth tokens obtained through agent/access in a grant in
// which the prober acts as itself (OAuthCredential).
//
// It must not decide what is safe to call (the targets carry the read-only
// tools their entries classify), must not act for a user or a principal,
// and must not store anything itself: what it produces goes through the
// caller's Apply, which on the control plane is the one verified write
// path.
package prober

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	neturl "net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mcpready/mcpready/agent/access"
	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/internal/loopback"
	"github.com/mcpready/mcpready/probe"
	"github.com/mcpready/mcpready/readiness"
	"github.com/mcpready/mcpready/sign"
)

// Options configure a Prober. Targets, Apply, Signer and Observer are
// required.
type Options struct {
	// Targets lists what to probe this round.
	Targets func(ctx context.Context) ([]probe.Target, error)
	// Canaries are calls made each round besides the targets, each at the
	// target of its server that calls its tool (see Canary). A canary no
	// target matches is not called: it is logged each round, and its
	// evidence-age series stays (at +Inf, or growing), so that the alert
	// on evidence age fires. Zero: none.
	Canaries []Canary
	// TokenFiles maps a server name to the file holding the bearer token
	// its probes present, read at every round (a rotated token is used
	// from the next round) and never logged. A target whose server's file
	// cannot be read, or is empty, is not probed that round: it is logged
	// and its evidence-age series keeps growing. Zero: every probe is
	// keyless.
	TokenFiles map[string]string
	// OAuth maps a server name to the OAuth settings its probes obtain
	// tokens with, as an agent configuration's upstream states them
	// (agent/config.OAuth, read with config.ParseOAuth): the prober gets,
	// caches, refreshes and presents them through agent/access, as the
	// agent does, and the Evidence's auth class is oauth:<grant>, so that
	// it counts for the agents' calls made with that grant. Only the grants
	// in which the prober acts as itself are accepted (ErrGrant): client
	// credentials, JWT bearer and ID-JAG. A target whose token cannot be
	// obtained is not probed that round: it is logged (without the token)
	// and its evidence-age series keeps growing. A server may not be in
	// both TokenFiles and OAuth. Zero: none.
	OAuth map[string]config.OAuth
	// OAuthHTTP reaches the authorization servers; nil: a default client.
	// Redirects to another origin are never followed (agent/access).
	OAuthHTTP *http.Client
	// MaxAge returns the Policy's maximum evidence age per layer; nil or an
	// empty map means DefaultInterval.
	MaxAge func(ctx context.Context) (map[string]*durationpb.Duration, error)
	// Apply stores one signed Evidence bundle.
	Apply func(ctx context.Context, bundle []byte) error
	// Signer signs the Evidence; Observer names it (see probe.EvidenceOptions).
	Signer   crypto.Signer
	Observer probe.EvidenceOptions
	// Concurrency bounds funnels in flight. Zero: 16.
	Concurrency int
	// Logger; nil discards.
	Logger *slog.Logger
	// Registerer receives the prober's metrics; nil records nothing.
	Registerer prometheus.Registerer
	// Now is the clock the evidence age is measured with. Zero: time.Now.
	Now func() time.Time
	// Jitter draws the jitter added to each wait between rounds: a value in
	// [0, n] for n the tenth of the interval. Zero: uniform from
	// math/rand/v2's runtime-seeded source.
	Jitter func(n int64) int64
	// After waits between rounds, as time.After does. Zero: time.After.
	After func(time.Duration) <-chan time.Time
}

// ErrGrant is Options.OAuth naming a grant the prober cannot use, or a
// server that also has a token file.
var ErrGrant = errors.New("prober: OAuth settings not usable")

// CheckGrant returns ErrGrant unless oa's grant is one in which the
// prober obtains tokens as itself.
func CheckGrant(oa config.OAuth) error {
	if !slices.Contains(selfGrants, oa.Grant) {
		return fmt.Errorf("%w: grant %q acts for a user or a principal; a probe acts as itself (%s)", ErrGrant, oa.Grant, strings.Join(selfGrants, ", "))
	}
	return nil
}

// OAuthCredential obtains c's token with oa for server's endpoint url,
// acting as itself, and returns the probe.Credential that presents it
// (refreshed by c when it nears expiry) with auth class oauth:<grant>.
// Its errors never contain a token or a secret.
func OAuthCredential(ctx context.Context, c *access.Client, server, url string, oa config.OAuth) (*probe.Credential, error) {
	if err := CheckGrant(oa); err != nil {
		return nil, err
	}
	if u, err := neturl.Parse(url); err != nil || !loopback.Confidential(u) {
		return nil, fmt.Errorf("%w: %q must be https: a token is presented to it (plain http on a loopback address only)", probe.ErrURL, url)
	}
	// One upstream per endpoint: discovery and tokens are the endpoint's
	// (its protected resource), not the server name's.
	up := access.Upstream{Name: server + " " + url, URL: url, OAuth: oa}
	if _, err := c.Token(ctx, access.Principal{}, &up); err != nil {
		return nil, err
	}
	return &probe.Credential{AuthClass: readiness.AuthOAuth(oa.Grant),
		Transport: func(base http.RoundTripper) http.RoundTripper { return c.Transport(base, up) }}, nil
}

// selfGrants are the OAuth grants in which the prober obtains tokens as
// itself: the others act for a user (authorization_code) or exchange a
// principal's token (token_exchange).
var selfGrants = []string{readiness.GrantClientCredentials, readiness.GrantJWTBearer, readiness.GrantIDJAG}

// Interval bounds.
const (
	DefaultInterval = time.Hour
	MinInterval     = time.Minute
)

// Prober runs rounds.
type Prober struct {
	o        Options
	access   *access.Client
	log      *slog.Logger
	probes   prometheus.Counter
	failed   *prometheus.CounterVec
	applied  *prometheus.CounterVec
	lastDone prometheus.Gauge
	age      *ageCollector
}

// New checks o and registers the metrics.
func New(o Options) (*Prober, error) {
	if o.Targets == nil || o.Apply == nil || o.Signer == nil || o.Observer.Observer == "" {
		return nil, fmt.Errorf("prober: Targets, Apply, Signer and Observer.Observer are required")
	}
	for server, oa := range o.OAuth {
		if _, dup := o.TokenFiles[server]; dup {
			return nil, fmt.Errorf("%w: server %s has both a token file and OAuth settings", ErrGrant, server)
		}
		if err := CheckGrant(oa); err != nil {
			return nil, fmt.Errorf("server %s: %w", server, err)
		}
	}
	p := &Prober{o: o, log: o.Logger,
		probes: prometheus.NewCounter(prometheus.CounterOpts{Name: "mcpready_prober_probes_total", Help: "Probes run: one per registry endpoint and one per canary."}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcpready_prober_layer_not_ready_total",
			Help: "Probes whose funnel stopped at a layer, by layer."}, []string{"layer"}),
		applied: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcpready_prober_evidence_total",
			Help: "Evidence artifacts produced, by result (applied, refused)."}, []string{"result"}),
		lastDone: prometheus.NewGauge(prometheus.GaugeOpts{Name: "mcpready_prober_last_round_timestamp_seconds",
			Help: "When the last round ended (evidence age is now minus this)."}),
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.o.Now == nil {
		p.o.Now = time.Now
	}
	if p.o.Jitter == nil {
		p.o.Jitter = func(n int64) int64 { return rand.Int64N(n + 1) }
	}
	if p.o.After == nil {
		p.o.After = time.After
	}
	p.age = &ageCollector{now: p.o.Now, last: map[string]time.Time{}}
	if len(o.OAuth) > 0 {
		p.access = access.New(access.Options{HTTP: o.OAuthHTTP})
	}
	if o.Registerer != nil {
		for _, c := range []prometheus.Collector{p.probes, p.failed, p.applied, p.lastDone, p.age} {
			if err := o.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("prober: metrics: %w", err)
			}
		}
	}
	return p, nil
}

// Round probes every target (and matched canary) once and applies the
// Evidence; it returns the reports of those it probed, in order (nil for a
// URL that cannot be probed at all; none for a target left out for its
// credential), and the first error applying one.
func (p *Prober) Round(ctx context.Context) ([]*probe.Report, error) {
	targets, err := p.o.Targets(ctx)
	if err != nil {
		return nil, fmt.Errorf("prober: targets: %w", err)
	}
	targets, unmatched := withCanaries(targets, p.o.Canaries)
	subjects := make([]string, 0, len(targets)+len(unmatched))
	for _, t := range targets {
		subjects = append(subjects, subject(t))
	}
	targets = p.withCredentials(ctx, targets)
	for _, c := range unmatched {
		p.log.Warn("canary not probed: no target calls its tool (no READ_ONLY registry entry for it at an http(s) endpoint)",
			"server", c.Server, "tool", c.Tool, "inputClass", c.InputClass)
		subjects = append(subjects, subject(probe.Target{Options: probe.Options{Server: c.Server, InputClass: c.InputClass}}))
	}
	p.age.keep(subjects)
	reports, errs := probe.RunAll(ctx, targets, p.o.Concurrency)
	var first error
	for i, r := range reports {
		if errs[i] != nil {
			p.log.Warn("endpoint not probed", "url", targets[i].URL, "error", errs[i])
			continue
		}
		p.probes.Inc()
		for _, l := range r.Layers {
			if l.Status == probe.NotReady {
				p.failed.WithLabelValues(string(l.Layer)).Inc()
			}
		}
		if err := p.publish(ctx, r); err != nil {
			p.applied.WithLabelValues("refused").Inc()
			p.log.Warn("evidence refused", "url", r.URL, "error", err)
			if first == nil {
				first = err
			}
			continue
		}
		p.applied.WithLabelValues("applied").Inc()
		p.age.applied(subject(targets[i]))
	}
	p.lastDone.SetToCurrentTime()
	return reports, first
}

// withCredentials gives each target its server's credential: the bearer
// token of its token file (TokenFiles), or its OAuth settings' token
// (OAuth), leaving out, with a warning, the targets whose credential
// cannot be had this round. Each token file is read once a round,
// however many of the server's targets present it.
func (p *Prober) withCredentials(ctx context.Context, targets []probe.Target) []probe.Target {
	if len(p.o.TokenFiles) == 0 && len(p.o.OAuth) == 0 {
		return targets
	}
	type read struct {
		token string
		err   error
	}
	tokens := map[string]read{} // by server, this round
	out := targets[:0:0]
	for _, t := range targets {
		server := t.Options.Server
		if path, ok := p.o.TokenFiles[server]; ok {
			r, done := tokens[server]
			if !done {
				r.token, r.err = probe.ReadToken(path)
				tokens[server] = r
			}
			if r.err != nil {
				p.log.Warn("endpoint not probed: its token file cannot be used", "server", server, "url", t.URL, "file", path, "error", r.err)
				continue
			}
			t.Options.Token = r.token
		}
		if oa, ok := p.o.OAuth[server]; ok {
			cred, err := OAuthCredential(ctx, p.access, server, t.URL, oa)
			if err != nil {
				p.log.Warn("endpoint not probed: no OAuth token", "server", server, "url", t.URL, "grant", oa.Grant, "error", err)
				continue
			}
			t.Options.Credential = cred
		}
		out = append(out, t)
	}
	return out
}

func (p *Prober) publish(ctx context.Context, r *probe.Report) error {
	obj, err := probe.Evidence(r, p.o.Observer)
	if err != nil {
		return err
	}
	b, _, err := sign.Sign(obj, p.o.Signer)
	if err != nil {
		return err
	}
	return p.o.Apply(ctx, b)
}

// Interval is half the shortest maximum evidence age the Policy sets (at
// least MinInterval), or DefaultInterval when it sets none.
func Interval(maxAge map[string]*durationpb.Duration) time.Duration {
	var ages []time.Duration
	for _, d := range maxAge {
		if d.AsDuration() > 0 {
			ages = append(ages, d.AsDuration())
		}
	}
	if len(ages) == 0 {
		return DefaultInterval
	}
	sort.Slice(ages, func(i, j int) bool { return ages[i] < ages[j] })
	return max(ages[0]/2, MinInterval)
}

// Run runs rounds until ctx ends: each round, then a wait of the interval
// plus up to 10% jitter.
func (p *Prober) Run(ctx context.Context) error {
	for {
		if _, err := p.Round(ctx); err != nil {
			p.log.Warn("round finished with refusals", "error", err)
		}
		every := DefaultInterval
		if p.o.MaxAge != nil {
			if m, err := p.o.MaxAge(ctx); err == nil {
				every = Interval(m)
			}
		}
		wait := every + time.Duration(p.o.Jitter(int64(every/10)))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.o.After(wait):
		}
	}
}

// FailedCounter is mcpready_prober_layer_not_ready_total, by layer.
func (p *Prober) FailedCounter() *prometheus.CounterVec { return p.failed }

// subject is the evidence-age label of a target: its server name, or its URL
// when it has none, followed by /input-class/<class> for a canary (as its
// Evidence's name is).
func subject(t probe.Target) string {
	s := t.URL
	if t.Options.Server != "" {
		s = t.Options.Server
	}
	if t.Options.InputClass != "" {
		s += "/input-class/" + t.Options.InputClass
	}
	return s
}

var ageDesc = prometheus.NewDesc("mcpready_prober_evidence_age_seconds",
	"Seconds since this prober last applied Evidence for the subject (+Inf: none since it started), one series per target of the latest round.",
	[]string{"subject"}, nil)

// ageCollector reports the evidence age of the latest round's subjects,
// measured when scraped.
type ageCollector struct {
	now  func() time.Time
	mu   sync.Mutex
	last map[string]time.Time // subject -> last applied; zero: none yet
}

// keep makes subjects the reported set, dropping the others.
func (a *ageCollector) keep(subjects []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	next := make(map[string]time.Time, len(subjects))
	for _, s := range subjects {
		next[s] = a.last[s]
	}
	a.last = next
}

func (a *ageCollector) applied(s string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.last[s] = a.now()
}

func (a *ageCollector) Describe(ch chan<- *prometheus.Desc) { ch <- ageDesc }

func (a *ageCollector) Collect(ch chan<- prometheus.Metric) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	for s, at := range a.last {
		age := math.Inf(1)
		if !at.IsZero() {
			age = now.Sub(at).Seconds()
		}
		m, err := prometheus.NewConstMetric(ageDesc, prometheus.GaugeValue, age, s)
		if err != nil { // a subject that is not valid UTF-8: reported as a scrape error, never a panic
			m = prometheus.NewInvalidMetric(ageDesc, err)
		}
		ch <- m
	}
}
