package validate

// Semantic validation (readiness layer 6): the policy's CEL validators
// (Policy.semanticValidation), compiled once per policy and evaluated over
// the arguments and structured result of a call that passed the other
// result checks.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/interpreter"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// SemanticCostLimit bounds one validator's evaluation (CEL cost units): an
// expression that would run longer fails as an error, never hangs the call.
const SemanticCostLimit = 10_000

// ErrSemantic is wrapped by every *SemanticFailure.
var ErrSemantic = errors.New("semantic validation failed")

// SemanticFailure is a result a validator rejected (Errored false) or could
// not evaluate (Errored true: a missing field, a type mismatch, the cost
// limit). Its text names the validator and version, never a value.
type SemanticFailure struct {
	Key, Version string
	Errored      bool
}

func (e *SemanticFailure) Error() string {
	if e.Errored {
		return fmt.Sprintf("semantic validator %q (%s) could not be evaluated", e.Key, e.Version)
	}
	return fmt.Sprintf("semantic validator %q (%s) rejected the result", e.Key, e.Version)
}

// Unwrap makes errors.Is(err, ErrSemantic) true.
func (e *SemanticFailure) Unwrap() error { return ErrSemantic }

// Validator is one compiled expression.
type Validator struct {
	// Key is the semanticValidation key: a class name or tool pattern.
	Key string
	// Version is "cel:" and 12 hex digits of SHA-256 over key and expression.
	Version string
	tag     string // "<key>=<version>"
	prg     cel.Program
}

// Semantic is the compiled validators of one policy. Nil (and the zero
// value) validates nothing. Safe for concurrent use.
type Semantic struct {
	validators []*Validator // sorted by key
	// Annotate: a rejected result is returned annotated, not withheld.
	Annotate bool
}

// CompileSemantic compiles the validators (Policy.semanticValidation) with
// the action of results (Policy.results.onSemanticFailure). Errors are
// *artifact.SemanticError.
func CompileSemantic(exprs map[string]string, action mcpreadyv1.SemanticFailureAction) (*Semantic, error) {
	s := &Semantic{Annotate: action == mcpreadyv1.SemanticFailureAction_SEMANTIC_FAILURE_ACTION_ANNOTATE}
	env, err := artifact.SemanticEnv()
	if err != nil {
		return nil, err
	}
	for key, expr := range exprs {
		ast, err := artifact.CompileSemantic(key, expr)
		if err != nil {
			return nil, err
		}
		prg, err := env.Program(ast, programOptions(env, ast)...)
		if err != nil {
			return nil, &artifact.SemanticError{Key: key, Reason: err.Error()}
		}
		sum := sha256.Sum256([]byte(key + "\x00" + expr))
		ver := "cel:" + hex.EncodeToString(sum[:6])
		s.validators = append(s.validators, &Validator{Key: key, Version: ver, tag: key + "=" + ver, prg: prg})
	}
	sort.Slice(s.validators, func(i, j int) bool { return s.validators[i].Key < s.validators[j].Key })
	return s, nil
}

// programOptions are the options of one validator's program: the runtime
// cost limit unless the expression's static worst-case cost, with every
// size unknown (so at its maximum), is already within it; then tracking
// the cost at run time would only slow every evaluation down.
func programOptions(env *cel.Env, ast *cel.Ast) []cel.ProgramOption {
	opts := []cel.ProgramOption{cel.EvalOptions(cel.OptOptimize)}
	if est, err := env.EstimateCost(ast, unknownSizes{}); err != nil || est.Max > SemanticCostLimit {
		opts = append(opts, cel.CostLimit(SemanticCostLimit))
	}
	return opts
}

// unknownSizes estimates nothing: the checker assumes every size and call
// cost at its maximum.
type unknownSizes struct{}

func (unknownSizes) EstimateSize(checker.AstNode) *checker.SizeEstimate { return nil }
func (unknownSizes) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// SemanticInput is what a validator sees.
type SemanticInput struct {
	// Args are the call's arguments (nil: ArgsJSON decoded, else an empty
	// map).
	Args map[string]any
	// ArgsJSON are the call's arguments as JSON, decoded only when a
	// validator reads args and Args is nil (not a JSON object: an empty
	// map).
	ArgsJSON json.RawMessage
	// Result is the structured result (nil: null).
	Result any
	// Tool is "<server>/<tool>"; Now the evaluation time.
	Tool string
	Now  time.Time
}

// SemanticVerdict is the outcome of Check.
type SemanticVerdict struct {
	// Outcome: "" when no validator applies, else "passed", "failed:<key>"
	// or "error:<key>" (the first validator, by key, that did not pass).
	Outcome string
	// Versions of the validators that ran: "<key>=<version>", comma-separated.
	Versions string
	// Failure is the first failure (nil when passed or none applied).
	Failure *SemanticFailure
}

// Check runs every validator whose key applies (applies(key)) over in, in
// key order, stopping at the first that does not pass. It never panics: a
// panic inside evaluation is an error verdict.
func (s *Semantic) Check(applies func(key string) bool, in SemanticInput) (v SemanticVerdict) {
	if s == nil || len(s.validators) == 0 {
		return v
	}
	act := activation{in: &in}
	var versions string
	for _, val := range s.validators {
		if !applies(val.Key) {
			continue
		}
		if versions == "" {
			versions = val.tag
		} else {
			versions += "," + val.tag
		}
		ok, errored := val.eval(act)
		if !ok {
			v.Failure = &SemanticFailure{Key: val.Key, Version: val.Version, Errored: errored}
			if errored {
				v.Outcome = "error:" + val.Key
			} else {
				v.Outcome = "failed:" + val.Key
			}
			break
		}
	}
	if versions == "" {
		return v
	}
	if v.Outcome == "" {
		v.Outcome = "passed"
	}
	v.Versions = versions
	return v
}

var emptyArgs = map[string]any{}

// activation resolves the validator variables from in without building a
// map per call, converting each only when an expression reads it.
type activation struct{ in *SemanticInput }

func (a activation) ResolveName(name string) (any, bool) {
	switch name {
	case "args":
		if a.in.Args == nil && len(a.in.ArgsJSON) > 0 {
			var m map[string]any
			if json.Unmarshal(a.in.ArgsJSON, &m) == nil {
				a.in.Args = m
			}
			a.in.ArgsJSON = nil // decoded once per Check
		}
		if a.in.Args == nil {
			return emptyArgs, true
		}
		return a.in.Args, true
	case "result":
		if a.in.Result == nil {
			return types.NullValue, true
		}
		return a.in.Result, true
	case "tool":
		return types.String(a.in.Tool), true
	case "now":
		return types.Timestamp{Time: a.in.Now}, true // a CEL value already: no conversion
	}
	return nil, false
}

func (a activation) Parent() interpreter.Activation { return nil }

// eval runs one validator: ok when it yields true; errored when it could
// not be evaluated (or yields something other than a bool).
func (val *Validator) eval(act activation) (ok, errored bool) {
	defer func() {
		if recover() != nil {
			ok, errored = false, true
		}
	}()
	out, _, err := val.prg.Eval(act)
	if err != nil {
		return false, true
	}
	b, isBool := out.Value().(bool)
	if !isBool {
		return false, true
	}
	return b, false
}
