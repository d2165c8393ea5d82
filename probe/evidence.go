package probe

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// EvidenceOptions describe the observer of a probe run. The zero value
// names no observer (Evidence refuses it) and gives a 24 h expiry.
type EvidenceOptions struct {
	// Observer is the observer's id (the issuer, whose key signs it).
	Observer string
	// Software is the observer's software and version, e.g.
	// "mcpready/probe v1.2.0". Zero: "mcpready/probe".
	Software string
	// Region is where the probe ran from. Zero: unknown.
	Region string
	// TTL is how long the evidence stays fresh. Zero: 24 h.
	TTL time.Duration
}

// ErrNoObserver: Evidence needs an observer id.
var ErrNoObserver = fmt.Errorf("probe: evidence needs an observer id")

// layerOf maps funnel layers to the readiness layers Evidence rates. The
// listing is part of protocol compatibility (the paper's funnel counts it
// there); registry presence is layer 0.
var layerOf = map[Layer]mcpreadyv1.ReadinessLayer{
	LayerRegistry:     mcpreadyv1.ReadinessLayer_READINESS_LAYER_REGISTRY,
	LayerReachability: mcpreadyv1.ReadinessLayer_READINESS_LAYER_REACHABILITY,
	LayerProtocol:     mcpreadyv1.ReadinessLayer_READINESS_LAYER_PROTOCOL,
	LayerListing:      mcpreadyv1.ReadinessLayer_READINESS_LAYER_PROTOCOL,
	LayerAccess:       mcpreadyv1.ReadinessLayer_READINESS_LAYER_ACCESS,
	LayerInvocation:   mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION,
	LayerResult:       mcpreadyv1.ReadinessLayer_READINESS_LAYER_RESULT_VALIDITY,
}

var definitions = map[mcpreadyv1.ReadinessLayer]string{
	mcpreadyv1.ReadinessLayer_READINESS_LAYER_REGISTRY:        "the server is in the registry",
	mcpreadyv1.ReadinessLayer_READINESS_LAYER_REACHABILITY:    "DNS, TCP, TLS identity against the URL's host, an HTTP answer without a redirect",
	mcpreadyv1.ReadinessLayer_READINESS_LAYER_PROTOCOL:        "server/discover or initialize succeeded and every tools/list page was read",
	mcpreadyv1.ReadinessLayer_READINESS_LAYER_ACCESS:          "no 401, 402 or 403 to the credential presented (or to none)",
	mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION:      "a schema-valid call of a consumer-classified read-only tool executed",
	mcpreadyv1.ReadinessLayer_READINESS_LAYER_RESULT_VALIDITY: "the result is not isError and matches the output schema",
}

// Evidence turns a probe report into a SYNTHETIC Evidence artifact, ready to
// sign: one sample, per-layer rates with their denominators (a layer not
// reached or skipped is excluded, never counted as a success), the error
// codes by layer, the protocol path, the auth class and the blind spots.
// It is named "probe/<server>", with "/input-class/<class>" after it when
// the report states an input class.
func Evidence(r *Report, o EvidenceOptions) (*artifact.Object, error) {
	if o.Observer == "" {
		return nil, ErrNoObserver
	}
	if o.Software == "" {
		o.Software = "mcpready/probe"
	}
	if o.TTL <= 0 {
		o.TTL = 24 * time.Hour
	}
	end := r.StartedAt.Add(r.Took)
	auth := r.AuthClass
	if auth == "" {
		auth = readiness.AuthKeyless
	}
	server := r.Server
	ev := &mcpreadyv1.Evidence{
		Provenance: &mcpreadyv1.Provenance{Issuer: o.Observer, VerificationMethod: "sigstore-bundle-key",
			Version: strconv.FormatInt(r.StartedAt.UnixMilli(), 10), IssuedAt: timestamppb.New(end), ExpiresAt: timestamppb.New(end.Add(o.TTL))},
		Subject: &mcpreadyv1.Subject{ServerName: server, Endpoint: r.URL, ServerVersion: r.ServerVersion, ToolName: r.ProbedTool,
			InputSchemaDigest: r.InputSchemaDigest, OutputSchemaDigest: r.OutputSchemaDigest, Region: o.Region, InputClass: r.InputClass,
			RegistryRecordVersion: r.RegistryRecordVersion},
		Observer:         &mcpreadyv1.Observer{Id: o.Observer, Software: o.Software, Independence: "consumer-synthetic"},
		Method:           mcpreadyv1.EvidenceMethod_EVIDENCE_METHOD_SYNTHETIC,
		AuthClass:        auth,
		Region:           o.Region,
		ProtocolVersion:  r.ProtocolVersion,
		Path:             protocolPath(r),
		WindowStart:      timestamppb.New(r.StartedAt),
		WindowEnd:        timestamppb.New(end),
		ObservedAt:       timestamppb.New(end),
		ExpiresAt:        timestamppb.New(end.Add(o.TTL)),
		Sample:           &mcpreadyv1.Sample{Attempted: 1, Eligible: 1},
		ConfidenceMethod: "none: one synthetic sample",
		Coverage:         fmt.Sprintf("%d tools on %d listing page(s)", r.Tools, r.Pages),
		BlindSpots:       append([]string{"one sample: a completion funnel, not a success rate"}, r.BlindSpots...),
	}
	if r.Partial {
		ev.Coverage += ", partial"
	}
	for _, l := range r.DriftObserved {
		if v, ok := mcpreadyv1.DriftLabel_value["DRIFT_LABEL_"+l]; ok {
			ev.DriftObserved = append(ev.DriftObserved, mcpreadyv1.DriftLabel(v))
		}
	}
	if r.ProtocolVersion != "" {
		ev.Subject.ProtocolVersions = []string{r.ProtocolVersion}
	}
	if r.Cold > 0 {
		ms := float64(r.Cold) / float64(time.Millisecond)
		ev.Latency = &mcpreadyv1.Latency{P50Ms: ms, P90Ms: ms, P95Ms: ms, P99Ms: ms, Count: 1}
	}
	rates := map[mcpreadyv1.ReadinessLayer]*mcpreadyv1.LayerRate{}
	var order []mcpreadyv1.ReadinessLayer
	for _, res := range r.Layers {
		l := layerOf[res.Layer]
		lr := rates[l]
		if lr == nil {
			lr = &mcpreadyv1.LayerRate{Layer: l, Denominator: 1, Successes: 1, SuccessDefinition: definitions[l]}
			rates[l] = lr
			order = append(order, l)
		}
		switch res.Status {
		case NotReady:
			lr.Successes, lr.Denominator, lr.Excluded = 0, 1, 0
			ev.Errors = append(ev.Errors, &mcpreadyv1.ErrorCount{Layer: l, Code: string(res.Layer) + ":" + res.Reason, Count: 1})
		case NotReached, Skipped:
			if lr.Successes == 1 { // an earlier part of this layer did not fail
				lr.Successes, lr.Denominator, lr.Excluded = 0, 0, 1
			}
		}
	}
	for _, l := range order {
		lr := rates[l]
		if lr.Denominator > 0 {
			lr.Rate = float64(lr.Successes) / float64(lr.Denominator)
		}
		ev.Rates = append(ev.Rates, lr)
	}
	name := server
	if name == "" {
		name = strings.TrimPrefix(strings.TrimPrefix(r.URL, "https://"), "http://")
	}
	name = "probe/" + artifact.CleanName(name)
	if r.InputClass != "" { // beside, not over, the evidence of calls in no class
		name += "/input-class/" + r.InputClass
	}
	return artifact.New(artifact.KindEvidence, name, ev), nil
}

// protocolPath names the era the layers above protocol used.
func protocolPath(r *Report) string {
	for _, e := range r.Eras {
		if e.OK {
			if e.Requested == VersionStateless {
				return "server/discover (2026-07-28)"
			}
			return "initialize (2025-11-25)"
		}
	}
	return "none"
}
