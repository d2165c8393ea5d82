package enroll

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// EvidenceName is the name of the qualification Evidence of an entry.
func EvidenceName(entry string) string { return "qualification/" + entry }

// DefaultQualificationTTL is how long a qualification stays fresh when the
// caller names no TTL; after it the control plane marks the entry STALE
// until it is qualified again.
const DefaultQualificationTTL = 30 * 24 * time.Hour

// Evidence writes the qualification result of each entry Qualify qualified
// as SYNTHETIC Evidence named EvidenceName(entry): the suite, the fixtures
// (negative ones included) as the sample, a rate of passed fixtures, each
// failed fixture as an error code, the transcript's digest and an expiry
// ttl after now (zero: DefaultQualificationTTL). Fixture details (which may
// hold server text) are not copied.
func Evidence(entries []*artifact.Object, transcript []Fixture, issuer string, now time.Time, ttl time.Duration) ([]*artifact.Object, error) {
	if ttl <= 0 {
		ttl = DefaultQualificationTTL
	}
	byTool := map[string][]Fixture{}
	for _, f := range transcript {
		byTool[f.Tool] = append(byTool[f.Tool], f)
	}
	var out []*artifact.Object
	for _, o := range entries {
		e, ok := o.Spec.(*mcpreadyv1.RegistryEntry)
		if !ok || e.GetQualification() == nil {
			continue
		}
		id := e.GetIdentity()
		fx := byTool[id.GetToolName()]
		raw, err := json.Marshal(fx)
		if err != nil {
			return nil, err
		}
		digest, err := artifact.CanonicalDigest(raw)
		if err != nil {
			return nil, err
		}
		passed, negatives := 0, 0
		ev := &mcpreadyv1.Evidence{
			Provenance: &mcpreadyv1.Provenance{Issuer: issuer, VerificationMethod: "sigstore-bundle-key", Version: strconv.FormatInt(now.UnixMilli(), 10),
				IssuedAt: timestamppb.New(now), ExpiresAt: timestamppb.New(now.Add(ttl)), RetrievalDigest: digest},
			Subject: &mcpreadyv1.Subject{ServerName: id.GetServerName(), ServerVersion: id.GetServerVersion(), ToolName: id.GetToolName(),
				Endpoint: id.GetEndpoint(), InputSchemaDigest: id.GetInputSchemaDigest(), OutputSchemaDigest: id.GetOutputSchemaDigest()},
			Observer:         &mcpreadyv1.Observer{Id: issuer, Software: "mcpready enroll --qualify (" + Suite + ")", Independence: "self"},
			Method:           mcpreadyv1.EvidenceMethod_EVIDENCE_METHOD_SYNTHETIC,
			ProtocolVersion:  id.GetProtocolVersion(),
			Path:             "qualification suite " + Suite,
			WindowStart:      timestamppb.New(now),
			WindowEnd:        timestamppb.New(now),
			ObservedAt:       timestamppb.New(now),
			ExpiresAt:        timestamppb.New(now.Add(ttl)),
			ConfidenceMethod: "none: a fixture suite, pass or fail",
			BlindSpots:       []string{"one run of the suite from one vantage point", "semantic usefulness and workflow contribution not measured"},
		}
		if id.GetProtocolVersion() != "" {
			ev.Subject.ProtocolVersions = []string{id.GetProtocolVersion()}
		}
		for _, f := range fx {
			if f.Negative {
				negatives++
			}
			if f.Passed {
				passed++
				continue
			}
			ev.Errors = append(ev.Errors, &mcpreadyv1.ErrorCount{Layer: mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION, Code: "fixture:" + f.Name, Count: 1})
		}
		n := int64(len(fx))
		ev.Sample = &mcpreadyv1.Sample{Attempted: n, Eligible: n}
		lr := &mcpreadyv1.LayerRate{Layer: mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION, Successes: int64(passed), Denominator: n,
			SuccessDefinition: fmt.Sprintf("fixtures of %s passed (%d negative: the call must be refused)", Suite, negatives)}
		if n > 0 {
			lr.Rate = float64(passed) / float64(n)
		}
		ev.Rates = []*mcpreadyv1.LayerRate{lr}
		ev.Coverage = fmt.Sprintf("%d of %d fixtures passed", passed, n)
		out = append(out, artifact.New(artifact.KindEvidence, EvidenceName(o.Metadata.Name), ev))
	}
	return out, nil
}
