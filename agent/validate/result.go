package validate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// DefaultMaxResultBytes applies when the policy sets no limit.
const DefaultMaxResultBytes = 4 << 20

// Rules are the result rules of the policy.
type Rules struct {
	// MaxResultBytes: results larger than this are rejected. Zero means
	// DefaultMaxResultBytes; negative means no limit.
	MaxResultBytes int64
	// Tripwire: scan text results (and strings in structured content).
	Tripwire bool
	// RequireOutputSchema: reject results of tools without a pinned output
	// schema.
	RequireOutputSchema bool
	// Semantic are the policy's semantic validators (CompileSemantic); nil
	// runs none.
	Semantic *Semantic
}

// RulesFromPolicy converts Policy.results (nil allowed).
func RulesFromPolicy(r *mcpreadyv1.ResultRules) Rules {
	return Rules{MaxResultBytes: r.GetMaxResultBytes(), Tripwire: r.GetInjectionTripwire(), RequireOutputSchema: r.GetRequireOutputSchema()}
}

// Result is the part of a tools/call result that is checked.
type Result struct {
	// Size of the encoded result as received, in bytes.
	Size int
	// IsError: isError was true (schema validation is skipped: an error
	// result need not match the output schema).
	IsError bool
	// Structured is structuredContent as raw JSON; nil when absent.
	Structured json.RawMessage
	// Value, when not nil, is Structured already decoded with exact numbers
	// (json.Number, or float64 integers within ±2^53), and is checked
	// instead of decoding Structured again. It is not modified.
	Value any
	// Text holds the texts the tripwire scans: of each text content block,
	// and of embedded resources and resource links.
	Text []string
}

// Checker validates results against pinned output schemas. Compiled schemas
// are cached by digest. Safe for concurrent use.
type Checker struct {
	rules   Rules
	schemas sync.Map // digest -> *pinnedSchema
}

// pinnedSchema is a compiled output schema and, when it has that shape,
// its simpleSchema (nil otherwise).
type pinnedSchema struct {
	full   *jsonschema.Schema
	simple *simpleSchema
}

// NewChecker returns a Checker with rules.
func NewChecker(r Rules) *Checker {
	if r.MaxResultBytes == 0 {
		r.MaxResultBytes = DefaultMaxResultBytes
	}
	return &Checker{rules: r}
}

// Rules returns the checker's effective rules.
func (c *Checker) Rules() Rules { return c.rules }

// ErrSchemaDigest is returned by Pin when the schema does not hash to the
// pinned digest.
var ErrSchemaDigest = errors.New("validate: output schema does not match its pinned digest")

// Pin compiles schema (JSON Schema 2020-12 unless it says otherwise) and
// caches it under digest, which must be its JCS SHA-256 digest. References
// to external documents are refused: schemas come from untrusted servers.
func (c *Checker) Pin(digest string, schema json.RawMessage) error {
	if _, ok := c.schemas.Load(digest); ok {
		return nil
	}
	got, err := artifact.CanonicalDigest(schema)
	if err != nil {
		return fmt.Errorf("validate: output schema: %w", err)
	}
	if got != digest {
		return fmt.Errorf("%w: pinned %s, got %s", ErrSchemaDigest, digest, got)
	}
	sch, err := compile(schema)
	if err != nil {
		return err
	}
	c.schemas.Store(digest, sch)
	return nil
}

// Pinned reports whether a schema is cached for digest.
func (c *Checker) Pinned(digest string) bool {
	_, ok := c.schemas.Load(digest)
	return ok
}

type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external schema reference %q refused", url)
}

// compile compiles one JSON Schema document (default draft 2020-12) with
// every external reference refused.
func compile(schema json.RawMessage) (*pinnedSchema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("validate: output schema is not JSON: %w", err)
	}
	comp := jsonschema.NewCompiler()
	comp.DefaultDraft(jsonschema.Draft2020)
	comp.UseLoader(noLoader{})
	const loc = "mcpready:output-schema.json"
	if err := comp.AddResource(loc, doc); err != nil {
		return nil, fmt.Errorf("validate: output schema: %w", err)
	}
	sch, err := comp.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("validate: output schema: %w", err)
	}
	return &pinnedSchema{full: sch, simple: simpleOf(doc)}, nil
}

// Check validates one result of a tool whose pinned output schema digest is
// outputSchemaDigest ("" when it has none). Order: size, output schema
// (skipped for isError results), tripwire. The schema must have been Pinned.
func (c *Checker) Check(outputSchemaDigest string, r Result) error {
	if c.rules.MaxResultBytes > 0 && int64(r.Size) > c.rules.MaxResultBytes {
		return invalid(ErrTooLarge, fmt.Sprintf("%d bytes, limit %d", r.Size, c.rules.MaxResultBytes))
	}
	structured := r.Value
	if structured == nil && len(bytes.TrimSpace(r.Structured)) > 0 {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(r.Structured))
		if err != nil {
			return invalid(ErrOutputSchema, "structuredContent is not JSON")
		}
		structured = v
	}
	if !r.IsError {
		switch {
		case outputSchemaDigest != "":
			v, ok := c.schemas.Load(outputSchemaDigest)
			if !ok {
				return invalid(ErrOutputSchema, "pinned output schema "+outputSchemaDigest+" is not loaded")
			}
			if structured == nil {
				return invalid(ErrOutputSchema, "structuredContent is missing")
			}
			if err := v.(*pinnedSchema).validate(structured); err != nil {
				return invalid(ErrOutputSchema, schemaDetail(err))
			}
		case c.rules.RequireOutputSchema:
			return invalid(ErrNoOutputSchema, "")
		}
	}
	if c.rules.Tripwire {
		for _, t := range r.Text {
			if h, hit := Scan(t); hit {
				return invalid(ErrInjection, "text result: "+h.Rule)
			}
		}
		if h, hit := scanValue(structured); hit {
			return invalid(ErrInjection, "structured result: "+h.Rule)
		}
	}
	return nil
}

// validate checks v against the schema: nil when its simpleSchema passes
// it, else the full validator's verdict.
func (p *pinnedSchema) validate(v any) error {
	if p.simple != nil && p.simple.passes(v) {
		return nil
	}
	return p.full.Validate(v)
}

// schemaDetail keeps the failing locations, never the offending values.
func schemaDetail(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return "invalid"
	}
	var locs []string
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 && len(locs) < 5 {
			locs = append(locs, "/"+strings.Join(e.InstanceLocation, "/"))
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return "at " + strings.Join(locs, ", ")
}

func scanValue(v any) (hit Hit, found bool) {
	found = eachString(v, func(s string) bool {
		hit, found = Scan(s)
		return found
	})
	return hit, found
}

func invalid(err error, detail string) *Outcome {
	return fail(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_INVALID_RESULT, mcpreadyv1.ReadinessLayer_READINESS_LAYER_RESULT_VALIDITY, err, detail)
}
