package console

import (
	"bytes"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/discovery"
	"github.com/mcpready/mcpready/controlplane/receiptstore"
	"github.com/mcpready/mcpready/explain"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/probe/analyze"
	"github.com/mcpready/mcpready/sign"
)

// Identity is an exact tool identity.
type Identity struct {
	Server             string `json:"server"`
	ServerVersion      string `json:"serverVersion,omitempty"`
	Tool               string `json:"tool"`
	ToolVersion        string `json:"toolVersion,omitempty"`
	Endpoint           string `json:"endpoint,omitempty"`
	ProtocolVersion    string `json:"protocolVersion,omitempty"`
	InputSchemaDigest  string `json:"inputSchemaDigest,omitempty"`
	OutputSchemaDigest string `json:"outputSchemaDigest,omitempty"`
	DefinitionDigest   string `json:"definitionDigest,omitempty"`
}

func identityOf(id *mcpreadyv1.ToolIdentity) Identity {
	return Identity{Server: id.GetServerName(), ServerVersion: id.GetServerVersion(), Tool: id.GetToolName(), ToolVersion: id.GetToolVersion(),
		Endpoint: id.GetEndpoint(), ProtocolVersion: id.GetProtocolVersion(), InputSchemaDigest: id.GetInputSchemaDigest(),
		OutputSchemaDigest: id.GetOutputSchemaDigest(), DefinitionDigest: id.GetDefinitionDigest()}
}

// Event is one lifecycle transition.
type Event struct {
	At       time.Time `json:"at"`
	From     string    `json:"from"`
	To       string    `json:"to"`
	Reason   string    `json:"reason,omitempty"`
	Drift    []string  `json:"drift,omitempty"`
	Related  string    `json:"related,omitempty"`
	Reporter string    `json:"reporter,omitempty"`
}

// Entry is one registry entry.
type Entry struct {
	Name           string    `json:"name"`
	Identity       Identity  `json:"identity"`
	State          string    `json:"state"`
	LastEvidenceAt time.Time `json:"lastEvidenceAt,omitzero"`
	Drift          []string  `json:"drift,omitempty"`
	// Supersedes is the old entry this candidate replaces; SupersededBy
	// the candidate created when this entry drifted; Candidates every
	// entry naming this one as superseded.
	Supersedes   string   `json:"supersedes,omitempty"`
	SupersededBy string   `json:"supersededBy,omitempty"`
	Candidates   []string `json:"candidates,omitempty"`
	Events       []Event  `json:"events"`
}

func state(s mcpreadyv1.LifecycleState) string {
	return explain.EnumWord(s.String(), "LIFECYCLE_STATE_")
}

func driftWords(ls []mcpreadyv1.DriftLabel) []string {
	var out []string
	for _, l := range ls {
		out = append(out, explain.EnumWord(l.String(), "DRIFT_LABEL_"))
	}
	return out
}

// specs returns the signed specs of the latest artifacts of kind k by
// name (already verified by the write path; Peek only decodes).
func specs[T any](c *Console, r *http.Request, k artifact.Kind) (map[string]T, []string, error) {
	recs, _, err := c.o.Artifacts.List(r.Context(), k)
	if err != nil {
		return nil, nil, err
	}
	out := map[string]T{}
	var names []string
	for _, rec := range recs {
		if rec.Deleted {
			continue
		}
		obj, err := sign.Peek(rec.Bundle)
		if err != nil {
			continue
		}
		if s, ok := obj.Spec.(T); ok {
			out[rec.Name] = s
			names = append(names, rec.Name)
		}
	}
	slices.Sort(names)
	return out, names, nil
}

func (c *Console) registry(r *http.Request) (string, any, error) {
	sts, err := c.o.Registry.Status(r.Context(), "")
	if err != nil {
		return "", nil, err
	}
	sp, _, err := specs[*mcpreadyv1.RegistryEntry](c, r, artifact.KindRegistryEntry)
	if err != nil {
		return "", nil, err
	}
	candidates := map[string][]string{}
	for name, s := range sp {
		if old := s.GetSupersedes(); old != "" {
			candidates[old] = append(candidates[old], name)
		}
	}
	entries := []Entry{}
	for _, st := range sts {
		s := sp[st.GetName()]
		e := Entry{Name: st.GetName(), Identity: identityOf(st.GetIdentity()), State: state(st.GetState()), Drift: driftWords(s.GetDrift()),
			Supersedes: s.GetSupersedes(), SupersededBy: st.GetSupersededBy(), Events: []Event{}}
		if t := st.GetLastEvidenceAt(); t != nil {
			e.LastEvidenceAt = t.AsTime()
		}
		e.Candidates = candidates[e.Name]
		slices.Sort(e.Candidates)
		for _, ev := range st.GetEvents() {
			e.Events = append(e.Events, Event{At: ev.GetAt().AsTime(), From: state(ev.GetFrom()), To: state(ev.GetTo()), Reason: ev.GetReason(),
				Drift: driftWords(ev.GetDrift()), Related: ev.GetRelatedEntry(), Reporter: ev.GetReporter()})
			if len(e.Drift) == 0 && len(ev.GetDrift()) > 0 {
				e.Drift = driftWords(ev.GetDrift())
			}
		}
		entries = append(entries, e)
	}
	slices.SortFunc(entries, func(a, b Entry) int { return strings.Compare(a.Name, b.Name) })
	return "Registry", struct {
		Entries []Entry `json:"entries"`
	}{entries}, nil
}

// Rate is one layer's rate with its denominator; Unknown when nothing
// was measured at that layer.
type Rate struct {
	Layer       string  `json:"layer"`
	Successes   int64   `json:"successes"`
	Denominator int64   `json:"denominator"`
	Excluded    int64   `json:"excluded"`
	Rate        float64 `json:"rate"`
	Definition  string  `json:"definition,omitempty"`
	Unknown     bool    `json:"unknown"`
}

// EvidenceItem is one Evidence artifact as the console shows it.
type EvidenceItem struct {
	Name       string    `json:"name"`
	Server     string    `json:"server"`
	Tool       string    `json:"tool,omitempty"`
	Version    string    `json:"serverVersion,omitempty"`
	Endpoint   string    `json:"endpoint,omitempty"`
	Method     string    `json:"method"`
	Observer   string    `json:"observer"`
	Software   string    `json:"observerSoftware,omitempty"`
	ObservedAt time.Time `json:"observedAt,omitzero"`
	Age        string    `json:"age"`
	ExpiresAt  time.Time `json:"expiresAt,omitzero"`
	// Status is "fresh", "stale" (expired) or "unknown" (no layer has a
	// denominator).
	Status     string   `json:"status"`
	Attempted  int64    `json:"sampleAttempted"`
	Eligible   int64    `json:"sampleEligible"`
	Excluded   int64    `json:"sampleExcluded"`
	Receipts   int64    `json:"receiptCount,omitempty"`
	Rates      []Rate   `json:"rates"`
	P50Ms      float64  `json:"p50Ms,omitempty"`
	P95Ms      float64  `json:"p95Ms,omitempty"`
	Latencies  int64    `json:"latencyCount,omitempty"`
	Coverage   string   `json:"coverage,omitempty"`
	BlindSpots []string `json:"blindSpots"`
}

func (c *Console) evidenceItems(r *http.Request) ([]EvidenceItem, error) {
	sp, names, err := specs[*mcpreadyv1.Evidence](c, r, artifact.KindEvidence)
	if err != nil {
		return nil, err
	}
	now := c.o.Now()
	items := []EvidenceItem{}
	for _, name := range names {
		ev := sp[name]
		sub := ev.GetSubject()
		it := EvidenceItem{Name: name, Server: sub.GetServerName(), Tool: sub.GetToolName(), Version: sub.GetServerVersion(), Endpoint: sub.GetEndpoint(),
			Method: explain.EnumWord(ev.GetMethod().String(), "EVIDENCE_METHOD_"), Observer: ev.GetObserver().GetId(), Software: ev.GetObserver().GetSoftware(),
			Attempted: ev.GetSample().GetAttempted(), Eligible: ev.GetSample().GetEligible(), Excluded: ev.GetSample().GetExcluded(), Receipts: ev.GetReceiptCount(),
			P50Ms: ev.GetLatency().GetP50Ms(), P95Ms: ev.GetLatency().GetP95Ms(), Latencies: ev.GetLatency().GetCount(), Coverage: ev.GetCoverage(),
			BlindSpots: append([]string{}, ev.GetBlindSpots()...), Rates: []Rate{}, Age: "unknown", Status: "fresh"}
		if t := ev.GetObservedAt(); t != nil {
			it.ObservedAt = t.AsTime()
			it.Age = now.Sub(it.ObservedAt).Round(time.Second).String()
		}
		if t := ev.GetExpiresAt(); t != nil {
			it.ExpiresAt = t.AsTime()
		}
		measured := false
		for _, lr := range ev.GetRates() {
			rt := Rate{Layer: explain.EnumWord(lr.GetLayer().String(), "READINESS_LAYER_"), Successes: lr.GetSuccesses(), Denominator: lr.GetDenominator(),
				Excluded: lr.GetExcluded(), Definition: lr.GetSuccessDefinition(), Unknown: lr.GetDenominator() <= 0}
			if !rt.Unknown {
				rt.Rate = float64(rt.Successes) / float64(rt.Denominator)
				measured = true
			}
			it.Rates = append(it.Rates, rt)
		}
		switch {
		case it.ExpiresAt.IsZero() || !now.Before(it.ExpiresAt):
			it.Status = "stale"
		case !measured:
			it.Status = "unknown"
		}
		items = append(items, it)
	}
	return items, nil
}

func (c *Console) evidence(r *http.Request) (string, any, error) {
	items, err := c.evidenceItems(r)
	if err != nil {
		return "", nil, err
	}
	counts := map[string]int{}
	for _, it := range items {
		counts[it.Status]++
	}
	return "Evidence", struct {
		Evidence []EvidenceItem `json:"evidence"`
		Counts   map[string]int `json:"counts"`
	}{items, counts}, nil
}

// Row is one receipt in a search result.
type Row struct {
	ID        string    `json:"id"`
	At        time.Time `json:"at,omitzero"`
	Agent     string    `json:"agent"`
	Workflow  string    `json:"workflow,omitempty"`
	Requested string    `json:"requested"`
	Selected  string    `json:"selected,omitempty"`
	Outcome   string    `json:"outcome"`
	Latency   string    `json:"latency"`
}

func rowOf(sr *mcpreadyv1.StoredReceipt) Row {
	rc := sr.GetReceipt()
	row := Row{ID: rc.GetReceiptId(), Agent: sr.GetAgentId(), Workflow: rc.GetWorkflowId(), Requested: rc.GetRequested(),
		Outcome: explain.OutcomeWord(rc.GetOutcome()), Latency: rc.GetLatency().AsDuration().Round(time.Microsecond).String()}
	if t := rc.GetEmittedAt(); t != nil {
		row.At = t.AsTime()
	}
	if s := rc.GetSelected(); s.GetToolName() != "" {
		row.Selected = s.GetServerName() + "/" + s.GetToolName()
	}
	return row
}

func (c *Console) receipts(r *http.Request) (string, any, error) {
	s, err := ParseSearch(r.URL.Query(), c.o.Now())
	if err != nil {
		return "", nil, &statusError{http.StatusBadRequest, err.Error()}
	}
	out := struct {
		Search   Search `json:"search"`
		Kept     bool   `json:"receiptsKept"`
		Receipts []Row  `json:"receipts"`
	}{Search: s, Kept: c.o.Receipts != nil, Receipts: []Row{}}
	if c.o.Receipts == nil {
		return "Receipts", out, nil
	}
	rs, _, err := c.o.Receipts.Query(r.Context(), s.Query)
	if err != nil {
		return "", nil, err
	}
	for i := len(rs) - 1; i >= 0; i-- { // newest first
		out.Receipts = append(out.Receipts, rowOf(rs[i]))
	}
	return "Receipts", out, nil
}

// Explained is one receipt with its explanation.
type Explained struct {
	Row         Row                 `json:"receipt"`
	Digest      string              `json:"digest"`
	Batch       string              `json:"batch"`
	Explanation []explain.Paragraph `json:"explanation"`
}

func (c *Console) receipt(r *http.Request) (string, any, error) {
	id := r.PathValue("id")
	if c.o.Receipts == nil {
		return "", nil, &statusError{http.StatusNotFound, "this control plane replica keeps no receipts"}
	}
	rs, _, err := c.o.Receipts.Query(r.Context(), receiptstore.Query{ReceiptID: id, Limit: 1})
	if err != nil {
		return "", nil, err
	}
	if len(rs) == 0 {
		return "", nil, &statusError{http.StatusNotFound, "no receipt " + id + " on this replica"}
	}
	sr := rs[0]
	return "Receipt " + id, Explained{Row: rowOf(sr), Digest: sr.GetDigest(), Batch: sr.GetBatchId(), Explanation: explain.Of(sr)}, nil
}

// funnelLayers are the probe funnel's layers, in order.
var funnelLayers = []mcpreadyv1.ReadinessLayer{
	mcpreadyv1.ReadinessLayer_READINESS_LAYER_REACHABILITY, mcpreadyv1.ReadinessLayer_READINESS_LAYER_PROTOCOL,
	mcpreadyv1.ReadinessLayer_READINESS_LAYER_ACCESS, mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION,
	mcpreadyv1.ReadinessLayer_READINESS_LAYER_RESULT_VALIDITY,
}

// recentCalls is how many of the newest receipts the call latency bands
// count.
const recentCalls = 1000

// probeNote says what the probe chart is, and what it is not.
const probeNote = "subjects of the stored synthetic Evidence passing each layer, and the median probe latency of each: not availability"

// Probes is the probe page: the funnel and the latency bands, as numbers
// and as an SVG chart.
type Probes struct {
	Subjects int            `json:"subjects"`
	Funnel   []analyze.Bar  `json:"funnel"`
	Bands    []analyze.Band `json:"probeLatencyBands"`
	Calls    int            `json:"recentCalls"`
	Call     []analyze.Band `json:"callLatencyBands"`
	Probe    template.HTML  `json:"-"`
	Traffic  template.HTML  `json:"-"`
}

func (c *Console) probes(r *http.Request) (string, any, error) {
	sp, names, err := specs[*mcpreadyv1.Evidence](c, r, artifact.KindEvidence)
	if err != nil {
		return "", nil, err
	}
	p := Probes{Funnel: []analyze.Bar{}, Bands: []analyze.Band{}, Call: []analyze.Band{}}
	var ms []float64
	for _, name := range names {
		ev := sp[name]
		if ev.GetMethod() != mcpreadyv1.EvidenceMethod_EVIDENCE_METHOD_SYNTHETIC {
			continue
		}
		p.Subjects++
		if l := ev.GetLatency(); l.GetCount() > 0 {
			ms = append(ms, l.GetP50Ms())
		}
	}
	for _, l := range funnelLayers {
		n := 0
		for _, name := range names {
			ev := sp[name]
			if ev.GetMethod() != mcpreadyv1.EvidenceMethod_EVIDENCE_METHOD_SYNTHETIC {
				continue
			}
			for _, lr := range ev.GetRates() {
				if lr.GetLayer() == l && lr.GetDenominator() > 0 && lr.GetSuccesses() > 0 {
					n++
					break
				}
			}
		}
		p.Funnel = append(p.Funnel, analyze.Bar{Label: explain.EnumWord(l.String(), "READINESS_LAYER_"), N: n})
	}
	p.Bands = analyze.Bands(ms)
	probe := analyze.Chart{Title: "Probe funnel (" + strconv.Itoa(p.Subjects) + " subjects)", Note: probeNote, Sections: []analyze.Section{
		{Total: p.Subjects, Bars: p.Funnel}, bandSection("Median probe latency", len(ms), p.Bands)}}
	if p.Probe, err = svg(probe); err != nil {
		return "", nil, err
	}
	if c.o.Receipts != nil {
		rs, _, err := c.o.Receipts.Query(r.Context(), receiptstore.Query{Limit: recentCalls})
		if err != nil {
			return "", nil, err
		}
		var calls []float64
		for _, sr := range rs {
			if sr.GetReceipt().GetOutcome() == mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS {
				calls = append(calls, float64(sr.GetReceipt().GetLatency().AsDuration())/float64(time.Millisecond))
			}
		}
		p.Calls, p.Call = len(calls), analyze.Bands(calls)
		traffic := analyze.Chart{Title: "Successful calls by latency (" + strconv.Itoa(p.Calls) + ")", Note: "the newest " + strconv.Itoa(recentCalls) + " receipts on this replica",
			Sections: []analyze.Section{bandSection("", p.Calls, p.Call)}}
		if p.Traffic, err = svg(traffic); err != nil {
			return "", nil, err
		}
	}
	return "Probes", p, nil
}

func bandSection(heading string, total int, bands []analyze.Band) analyze.Section {
	s := analyze.Section{Heading: heading, Total: total}
	for _, b := range bands {
		s.Bars = append(s.Bars, analyze.Bar{Label: b.Label, N: b.Calls})
	}
	return s
}

// svg renders a chart the analyze package wrote (every text in it is
// escaped there) for inlining.
func svg(ch analyze.Chart) (template.HTML, error) {
	var b bytes.Buffer
	if err := ch.WriteSVG(&b); err != nil {
		return "", err
	}
	return template.HTML(b.String()), nil // analyze escapes every text it writes
}

func (c *Console) fleet(_ *http.Request) (string, any, error) {
	out := struct {
		Known  bool              `json:"known"`
		Agents []discovery.Agent `json:"agents"`
	}{Known: c.o.Fleet != nil, Agents: []discovery.Agent{}}
	if c.o.Fleet != nil {
		out.Agents = append(out.Agents, c.o.Fleet.Agents()...)
	}
	return "Fleet", out, nil
}

func (c *Console) index(r *http.Request) (string, any, error) {
	return "Console", struct {
		Pages []string `json:"pages"`
	}{[]string{"registry", "evidence", "receipts", "probes", "fleet"}}, nil
}
