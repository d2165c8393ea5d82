package telemetry_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/mcpready/mcpready/agent/telemetry"
	"github.com/mcpready/mcpready/agent/validate"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/otelcoltest"
)

// TestHelperCollector is not a test: with MCPREADY_TEST_COLLECTOR=1 the
// test binary runs as an OpenTelemetry Collector (the OTLP receiver) in
// its own process, prints its gRPC endpoint, and runs until its stdin
// closes. BenchmarkTracing uses it so that what the collector spends is
// not counted as the agent's.
func TestHelperCollector(t *testing.T) {
	if os.Getenv("MCPREADY_TEST_COLLECTOR") != "1" {
		t.Skip("helper process")
	}
	col := otelcoltest.Start(t)
	fmt.Println(col.GRPC)
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
}

func collectorProcess(b *testing.B) string {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestHelperCollector$")
	cmd.Env = append(os.Environ(), "MCPREADY_TEST_COLLECTOR=1")
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { in.Close(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatal(err)
	}
	return line[:len(line)-1]
}

// BenchmarkTracing is the cost of tracing per tool call through the agent
// front (go-sdk client → front → go-sdk upstream, one warm session):
// "off" without telemetry, "on" with a SERVER and a CLIENT span per call,
// sampled at 100 % and exported over OTLP gRPC to a collector in another
// process, with both duration histograms.
func BenchmarkTracing(b *testing.B) {
	endpoint := collectorProcess(b)
	for _, mode := range []string{"off", "on"} {
		b.Run(mode, func(b *testing.B) {
			var tel *telemetry.Telemetry
			if mode == "on" {
				var err error
				tel, err = telemetry.New(context.Background(), telemetry.Options{Endpoint: endpoint, Protocol: telemetry.ProtocolGRPC, Sampler: sdktrace.AlwaysSample()})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
			}
			st := newStack(b, tel)
			cs := st.connect(b, "2025-11-25")
			ctx := context.Background()
			params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}}
			for range 50 {
				if _, err := cs.CallTool(ctx, params); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := cs.CallTool(ctx, params); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHooks is what the hooks themselves cost per tool call (one
// SERVER span with its receipt events, one CLIENT span, _meta injection,
// both histograms), off and on (100 % sampling, OTLP gRPC to a collector
// in another process), without the MCP traffic around them.
func BenchmarkHooks(b *testing.B) {
	endpoint := collectorProcess(b)
	rec := &mcpreadyv1.Receipt{ReceiptId: "r", PolicyVersion: "1", Selected: &mcpreadyv1.Selection{Entry: "test/echo"}, SchemaValidation: "passed"}
	meta := map[string]any{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	for _, mode := range []string{"off", "on"} {
		b.Run(mode, func(b *testing.B) {
			var tel *telemetry.Telemetry
			if mode == "on" {
				var err error
				if tel, err = telemetry.New(context.Background(), telemetry.Options{Endpoint: endpoint, Protocol: telemetry.ProtocolGRPC, Sampler: sdktrace.AlwaysSample()}); err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
			}
			b.ReportAllocs()
			for range b.N {
				ctx, sp := tel.Server(context.Background(), telemetry.Request{Method: "tools/call", Target: "echo", Protocol: "2025-11-25", Meta: meta,
					Incoming: telemetry.Incoming{Session: "s", RequestID: "7"}})
				ctx, cs := tel.Client(ctx, telemetry.Attempt{Method: "tools/call", Target: "echo", Endpoint: "http://127.0.0.1:8080/mcp", Number: 1})
				_ = tel.Inject(ctx, meta)
				cs.EndAttempt(validate.Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS})
				sp.End(rec, false, 0)
			}
		})
	}
}
