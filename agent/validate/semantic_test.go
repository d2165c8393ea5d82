package validate

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

var semNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func quote() SemanticInput {
	return SemanticInput{
		Args:   map[string]any{"currency": "EUR", "symbol": "ACME"},
		Result: map[string]any{"currency": "EUR", "price": 12.5, "asOf": "2026-12-01T11:59:30Z", "items": []any{"a", "b"}},
		Tool:   "com.example/quotes/quote", Now: semNow,
	}
}

func all(string) bool { return true }

// Freshness, non-empty lists and the request's currency: passed, failed
// (stopping at the first failure by key) and errored (a missing field)
// verdicts, each naming the validator and its version.
func TestSemanticCheck(t *testing.T) {
	s, err := CompileSemantic(map[string]string{
		"a-fresh":    "timestamp(result.asOf) > now - duration('5m')",
		"b-nonempty": "size(result.items) > 0",
		"c-currency": "result.currency == args.currency",
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	v := s.Check(all, quote())
	if v.Outcome != "passed" || v.Failure != nil || strings.Count(v.Versions, "=cel:") != 3 {
		t.Fatalf("%+v", v)
	}
	in := quote()
	in.Args["currency"] = "USD"
	in.Now = semNow.Add(time.Hour)
	v = s.Check(all, in)
	if v.Outcome != "failed:a-fresh" || v.Failure == nil || v.Failure.Errored || !errors.Is(v.Failure, ErrSemantic) {
		t.Fatalf("stale: %+v", v)
	}
	v = s.Check(func(k string) bool { return k == "c-currency" }, in)
	if v.Outcome != "failed:c-currency" || v.Versions == "" || strings.Contains(v.Failure.Error(), "USD") {
		t.Fatalf("currency: %+v", v)
	}
	in.Result = map[string]any{"price": 1}
	if v = s.Check(all, in); v.Outcome != "error:a-fresh" || !v.Failure.Errored {
		t.Fatalf("missing field: %+v", v)
	}
	in.Result = nil
	if v = s.Check(all, in); v.Outcome != "error:a-fresh" {
		t.Fatalf("no structured result: %+v", v)
	}
	if v = s.Check(func(string) bool { return false }, quote()); v.Outcome != "" || v.Versions != "" {
		t.Fatalf("nothing applies: %+v", v)
	}
	var none *Semantic
	if v = none.Check(all, quote()); v.Outcome != "" {
		t.Fatal("nil Semantic ran something")
	}
}

// Arguments given as JSON are what a validator reads as args (decoded
// only then); JSON that is not an object reads as an empty map.
func TestSemanticArgsJSON(t *testing.T) {
	s, err := CompileSemantic(map[string]string{"c-currency": "result.currency == args.currency"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	in := quote()
	in.Args, in.ArgsJSON = nil, []byte(`{"currency":"EUR"}`)
	if v := s.Check(all, in); v.Outcome != "passed" {
		t.Fatalf("EUR: %+v", v)
	}
	in.ArgsJSON = []byte(`{"currency":"USD"}`)
	if v := s.Check(all, in); v.Outcome != "failed:c-currency" {
		t.Fatalf("USD: %+v", v)
	}
	for _, raw := range []string{`[1]`, `null`, `{"currency":`} {
		in.ArgsJSON = []byte(raw)
		if v := s.Check(all, in); v.Outcome != "error:c-currency" {
			t.Fatalf("%s: %+v", raw, v)
		}
	}
	in.Args, in.ArgsJSON = map[string]any{"currency": "EUR"}, []byte(`{"currency":"USD"}`)
	if v := s.Check(all, in); v.Outcome != "passed" {
		t.Fatalf("Args first: %+v", v)
	}
}

// A validator that would run long stops at the cost limit as an error;
// one that does not compile is refused with its position.
func TestSemanticBounded(t *testing.T) {
	s, err := CompileSemantic(map[string]string{
		"slow": "args.list.all(x, args.list.all(y, args.list.all(z, x + y + z >= 0)))",
	}, mcpreadyv1.SemanticFailureAction_SEMANTIC_FAILURE_ACTION_ANNOTATE)
	if err != nil {
		t.Fatal(err)
	}
	list := make([]any, 200)
	for i := range list {
		list[i] = i
	}
	start := time.Now()
	v := s.Check(all, SemanticInput{Args: map[string]any{"list": list}, Now: semNow})
	if v.Outcome != "error:slow" || time.Since(start) > time.Second || !s.Annotate {
		t.Fatalf("%+v after %v", v, time.Since(start))
	}
	_, err = CompileSemantic(map[string]string{"bad": "result.x ==="}, 0)
	var se *artifact.SemanticError
	if !errors.As(err, &se) || se.Key != "bad" || se.Line != 1 {
		t.Fatalf("compile error %v", err)
	}
}

// BenchmarkSemantic is one CEL expression on a typical structured result
// (the ns/op includes building the activation); p50-ns and p99-ns are the
// per-evaluation percentiles.
func BenchmarkSemantic(b *testing.B) {
	for _, tc := range []struct{ name, expr string }{
		{"currency", "result.currency == args.currency"},
		{"nonempty", "size(result.items) > 0"},
		{"fresh", "timestamp(result.asOf) > now - duration('5m')"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s, err := CompileSemantic(map[string]string{tc.name: tc.expr}, 0)
			if err != nil {
				b.Fatal(err)
			}
			in := quote()
			var lat []time.Duration
			for b.Loop() {
				t0 := time.Now()
				if v := s.Check(all, in); v.Outcome != "passed" {
					b.Fatal(v)
				}
				lat = append(lat, time.Since(t0))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
		})
	}
}

// The runtime cost limit is dropped only for an expression whose static
// worst case, every size unknown, is within it; any expression whose cost
// grows with its input keeps it.
func TestCostLimitKeptUnlessBounded(t *testing.T) {
	env, err := artifact.SemanticEnv()
	if err != nil {
		t.Fatal(err)
	}
	for expr, tracked := range map[string]bool{
		"size(result.items) > 0":                        false,
		"timestamp(result.asOf) > now - duration('5m')": false,
		"result.currency == args.currency":              true, // dyn equality: size-dependent
		"args.list.all(x, x > 0)":                       true,
		"result.name.contains('a')":                     true,
	} {
		ast, err := artifact.CompileSemantic("k", expr)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(programOptions(env, ast)) == 2; got != tracked {
			t.Errorf("%s: cost tracked %v, want %v", expr, got, tracked)
		}
	}
}
