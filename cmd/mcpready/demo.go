package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/demo"
	"github.com/mcpready/mcpready/readiness"
)

// defaultAgentURL is the aggregate MCP endpoint of the local agent that
// `mcpready up` starts.
const defaultAgentURL = "http://127.0.0.1:7480/mcp"

// demoCallsOptions are the flags of demo calls.
type demoCallsOptions struct {
	serverOptions
	agent string
	deny  bool
	wait  time.Duration
}

func newDemoCmd() *cobra.Command {
	return newGroupCmd("demo", "Drive the demo started by `mcpready up`", newDemoCallsCmd())
}

func newDemoCallsCmd() *cobra.Command {
	o := &demoCallsOptions{}
	cmd := &cobra.Command{
		Use:   "calls [--agent URL] [--server ADDR]",
		Short: "Make the demo's calls through the agent, then show their receipts and one explanation",
		Long: `Make five calls through the agent with an MCP client (the go-sdk's):

  1. docs_lookup, the read-only capability served by two providers;
  2. docs_lookup while provider A fails: the agent falls back to provider B;
  3. update_listing_status, state-changing: the agent asks for human approval
     (answered "accept" here; --deny declines) and never retries it;
  4. delete_listing, which the policy forbids for this principal: refused
     with the reason;
  5. docs_lookup on com.example/docs-us directly: excluded by residency.

Then list the receipts the agent wrote for them (from the control plane at
--server) and explain the fallback call.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemoCalls(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
		},
	}
	fl := cmd.Flags()
	def := os.Getenv("MCPREADY_AGENT")
	if def == "" {
		def = defaultAgentURL
	}
	fl.StringVar(&o.agent, "agent", def, "agent MCP endpoint (env MCPREADY_AGENT)")
	fl.BoolVar(&o.deny, "deny", false, "decline the approval request instead of accepting it")
	fl.DurationVar(&o.wait, "wait", 20*time.Second, "how long to wait for the receipts to reach the control plane")
	o.serverOptions.addFlags(cmd)
	return cmd
}

func runDemoCalls(ctx context.Context, out, errOut io.Writer, o *demoCallsOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	start := time.Now().Add(-time.Second)
	calls, err := demo.RunCalls(ctx, demo.CallsOptions{AgentURL: o.agent, Deny: o.deny, Out: out})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nReceipts (from the control plane at %s):\n", o.server)
	receipts, err := awaitReceipts(ctx, errOut, &o.serverOptions, start, len(calls), o.wait)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RECEIPT\tREQUESTED\tOUTCOME\tSELECTED\tACTIONS\tREJECTED")
	var fallback string
	for _, sr := range receipts {
		r := sr.GetReceipt()
		var rejected []string
		for _, c := range r.GetCandidates() {
			if c.GetRejectionCode() != "" {
				rejected = append(rejected, c.GetServerName()+": "+c.GetRejectionCode())
			}
		}
		actions := summarizeActions(readiness.ActionStrings(r.GetActions()))
		if fallback == "" && strings.Contains(actions, "fallback") {
			fallback = r.GetReceiptId()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.GetReceiptId(), r.GetRequested(),
			strings.TrimPrefix(r.GetOutcome().String(), "OUTCOME_CLASS_"), r.GetSelected().GetServerName(),
			dash(actions), dash(strings.Join(rejected, "; ")))
	}
	tw.Flush()
	if fallback == "" && len(receipts) > 0 {
		fallback = receipts[0].GetReceipt().GetReceiptId()
	}
	if fallback == "" {
		return nil
	}
	fmt.Fprintf(out, "\n$ mcpready explain %s\n", fallback)
	return explainWithCLI(ctx, out, errOut, &o.serverOptions, fallback)
}

// summarizeActions shortens a receipt's actions for the table: repeated
// actions are counted ("retry:X ×2"), order kept.
func summarizeActions(actions []string) string {
	var order []string
	n := map[string]int{}
	for _, a := range actions {
		if n[a] == 0 {
			order = append(order, a)
		}
		n[a]++
	}
	for i, a := range order {
		if n[a] > 1 {
			order[i] = fmt.Sprintf("%s ×%d", a, n[a])
		}
	}
	return strings.Join(order, ", ")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// awaitReceipts polls the control plane until it holds at least n receipts
// emitted since start, or wait has passed (then it returns what it has).
func awaitReceipts(ctx context.Context, errOut io.Writer, so *serverOptions, since time.Time, n int, wait time.Duration) ([]*mcpreadyv1.StoredReceipt, error) {
	conn, err := so.dial()
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	client := mcpreadyv1.NewReceiptsServiceClient(conn)
	deadline := time.Now().Add(wait)
	for {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := client.QueryReceipts(qctx, &mcpreadyv1.QueryReceiptsRequest{Since: timestamppb.New(since), Limit: 100})
		cancel()
		got := resp.GetReceipts()
		if err == nil && len(got) >= n || time.Now().After(deadline) {
			if err != nil {
				return nil, fmt.Errorf("query receipts at %s: %w", so.server, err)
			}
			if len(got) < n {
				fmt.Fprintf(errOut, "mcpready: only %d of %d receipts reached the control plane within %s\n", len(got), n, wait)
			}
			return got, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// explainWithCLI runs `mcpready explain ID --server ADDR` (with the same
// TLS flags) as a child process of this very binary, so the explanation is
// exactly what the command prints.
func explainWithCLI(ctx context.Context, out, errOut io.Writer, so *serverOptions, id string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	c := exec.CommandContext(ctx, self, append([]string{"explain", id}, so.args()...)...)
	c.Stdout, c.Stderr = out, errOut
	if err := c.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return withCode(ee.ExitCode(), fmt.Errorf("explain %s failed", id))
		}
		return err
	}
	return nil
}
