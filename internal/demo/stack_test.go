package demo

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/enroll"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
	"github.com/mcpready/mcpready/sign"
)

// startStack runs the whole demo in this process on free loopback ports,
// reusing the keys made by TestMain.
func startStack(t *testing.T, dir string) *Stack {
	t.Helper()
	return startStackWith(t, StackOptions{DataDir: dir})
}

func startStackWith(t *testing.T, o StackOptions) *Stack {
	t.Helper()
	dir := o.DataDir
	if err := os.MkdirAll(filepath.Join(dir, "keys"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, n := range KeyNames {
		for _, ext := range []string{".key", ".pub"} {
			dst := filepath.Join(dir, "keys", n+ext)
			if _, err := os.Stat(dst); err == nil {
				continue
			}
			b, err := os.ReadFile(filepath.Join(testKeysDir, n+ext))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	o.ControlPlaneListen, o.MetricsListen, o.AgentListen = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	st, err := StartStack(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func receiptsSince(t *testing.T, addr string, since time.Time, n int) []*mcpreadyv1.Receipt {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := mcpreadyv1.NewReceiptsServiceClient(conn)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := c.QueryReceipts(context.Background(), &mcpreadyv1.QueryReceiptsRequest{Since: timestamppb.New(since), Limit: 100})
		if err == nil && len(resp.GetReceipts()) >= n {
			var out []*mcpreadyv1.Receipt
			for _, r := range resp.GetReceipts() {
				out = append(out, r.GetReceipt())
			}
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d receipts reached the control plane, want %d (err %v)", len(resp.GetReceipts()), n, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestStackDemoCalls(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole stack")
	}
	dir := t.TempDir()
	st := startStack(t, dir)
	defer st.Close()
	since := time.Now().Add(-time.Second)

	calls, err := RunCalls(context.Background(), CallsOptions{AgentURL: st.AgentURL, Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 5 {
		t.Fatalf("%d calls, want 5", len(calls))
	}
	for _, c := range calls {
		if c.Err != nil {
			t.Fatalf("%s: %v", c.Title, c.Err)
		}
	}
	if p := calls[0].Structured["provider"]; calls[0].ToolError || p != ServerDocsA {
		t.Errorf("lookup: provider %v (tool error %v: %s), want %s", p, calls[0].ToolError, calls[0].Text, ServerDocsA)
	}
	if p := calls[1].Structured["provider"]; calls[1].ToolError || p != ServerDocsB {
		t.Errorf("fallback: provider %v (tool error %v: %s), want %s", p, calls[1].ToolError, calls[1].Text, ServerDocsB)
	}
	if st.Servers.Refused(ServerDocsA) == 0 {
		t.Error("provider A was never tried before the fallback")
	}
	if !calls[2].ApprovalAsked || calls[2].ToolError || calls[2].Structured["status"] != "paused" {
		t.Errorf("update: approval asked %v, tool error %v, result %v %s", calls[2].ApprovalAsked, calls[2].ToolError, calls[2].Structured, calls[2].Text)
	}
	for i, code := range map[int]string{3: "principal_denied", 4: "residency"} {
		if !calls[i].ToolError || !strings.Contains(calls[i].Text, code) {
			t.Errorf("%s: tool error %v %q, want a refusal with %q", calls[i].Title, calls[i].ToolError, calls[i].Text, code)
		}
	}

	// The docs servers' published pages are resources the developer may
	// list and read on their transparent views; the internal draft is
	// neither listed nor readable.
	var asked bool
	docs, err := session(context.Background(), st.AgentURL+"/servers/"+ServerDocsA, CallsOptions{}, &asked)
	if err != nil {
		t.Fatal(err)
	}
	defer docs.Close()
	lr, err := docs.ListResources(context.Background(), nil)
	if err != nil || len(lr.Resources) != len(docPages) {
		t.Fatalf("resources/list: %v, %d resources, want the %d pages", err, len(lr.Resources), len(docPages))
	}
	if rr, err := docs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: lr.Resources[0].URI}); err != nil || rr.Contents[0].Text == "" {
		t.Fatalf("resources/read %s: %v", lr.Resources[0].URI, err)
	}
	if _, err := docs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "docs://docs-a.example/internal/roadmap"}); err == nil || !strings.Contains(err.Error(), string(readiness.CodeResourceNotPermitted)) {
		t.Fatalf("the internal draft: %v, want %s", err, readiness.CodeResourceNotPermitted)
	}
	// The rule's server pattern also matches the US mirror, which the
	// Policy's residency rules exclude: none of its pages either.
	us, err := session(context.Background(), st.AgentURL+"/servers/"+ServerDocsUS, CallsOptions{}, &asked)
	if err != nil {
		t.Fatal(err)
	}
	defer us.Close()
	if _, err := us.ListResources(context.Background(), nil); err == nil || !strings.Contains(err.Error(), string(readiness.CodeResidency)) {
		t.Fatalf("the US mirror's resources/list: %v, want %s", err, readiness.CodeResidency)
	}

	// Declined approval: refused, and the upstream is never called.
	before := st.Servers.Calls(ServerListings, ToolUpdateListingStatus)
	denied, err := RunCalls(context.Background(), CallsOptions{AgentURL: st.AgentURL, Deny: true})
	if err != nil {
		t.Fatal(err)
	}
	if !denied[2].ApprovalAsked || !denied[2].ToolError {
		t.Errorf("declined update: approval asked %v, tool error %v (%s)", denied[2].ApprovalAsked, denied[2].ToolError, denied[2].Text)
	}
	if got := st.Servers.Calls(ServerListings, ToolUpdateListingStatus); got != before || before != 1 {
		t.Errorf("update_listing_status ran %d times in total, want exactly once (never retried, never run when declined)", got)
	}

	// Every call left a receipt at the control plane.
	rs := receiptsSince(t, st.ControlPlane, since, 10)
	var fallback bool
	for _, r := range rs {
		for _, a := range r.GetActions() {
			fallback = fallback || a.GetKind() == readiness.ActionFallback
		}
	}
	if !fallback {
		t.Error("no receipt records the fallback")
	}
}

func TestStackRestartReusesData(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole stack twice")
	}
	dir := t.TempDir()
	st := startStack(t, dir)
	first := map[string]string{}
	for _, u := range st.Servers.Upstreams() {
		first[u.Name] = u.URL
	}
	bundle, err := os.ReadFile(filepath.Join(dir, "artifacts", "policy-default.bundle.json"))
	if err != nil {
		t.Fatal(err)
	}
	st.Close()

	st = startStack(t, dir)
	defer st.Close()
	for _, u := range st.Servers.Upstreams() {
		if first[u.Name] != u.URL {
			t.Errorf("%s moved from %s to %s", u.Name, first[u.Name], u.URL)
		}
	}
	again, _ := os.ReadFile(filepath.Join(dir, "artifacts", "policy-default.bundle.json"))
	if string(again) != string(bundle) {
		t.Error("the policy was re-signed although nothing changed")
	}
	ok, err := listsTool(context.Background(), st.AgentURL, CapabilityDocsLookup)
	if !ok {
		t.Fatalf("after restart the agent does not list %s: %v", CapabilityDocsLookup, err)
	}
}

// TestStackEnrollQualified checks the demo policy's promise: a server
// enrolled and qualified (as `mcpready enroll --qualify` does) is usable
// through the agent's transparent view at once.
func TestStackEnrollQualified(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole stack")
	}
	const name = "example.org/extra"
	extra := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server {
		return newDocsServer(name, "extra.example", "Look up a topic (an extra provider).", &counter{})
	}, nil))
	defer extra.Close()
	defer extra.CloseClientConnections()
	st := startStack(t, t.TempDir())
	defer st.Close() // first: the agent holds sessions to extra

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv, err := enroll.List(ctx, config.Upstream{Name: name, URL: extra.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	now := time.Now()
	entries, err := srv.Entries(Issuer, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Qualify(ctx, entries, now); err != nil {
		t.Fatal(err)
	}
	var items []Item
	for _, e := range entries {
		if s := e.Spec.(*mcpreadyv1.RegistryEntry).GetState(); s != mcpreadyv1.LifecycleState_LIFECYCLE_STATE_QUALIFIED {
			t.Fatalf("%s: state %s after qualification", e.Metadata.Name, s)
		}
		items = append(items, Item{e, KeyOrg})
	}
	signed, err := SignAll(items, testKeys)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(st.ControlPlane, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := apply(ctx, mcpreadyv1.NewAdminServiceClient(conn), signed); err != nil {
		t.Fatal(err)
	}

	view := st.AgentURL + "/servers/" + name
	lists := func() (bool, error) { return listsTool(ctx, view, ToolDocsLookup) }
	if err := st.waitUntil(ctx, 30*time.Second, name+" in the agent", lists); err != nil {
		t.Fatal(err)
	}
	var asked bool
	cs, err := session(ctx, view, CallsOptions{}, &asked)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: ToolDocsLookup, Arguments: map[string]any{"query": "residency"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("enrolled tool refused: %+v", res.Content)
	}
}

func TestStackRefusesSharedDataDir(t *testing.T) {
	dir := t.TempDir()
	unlock, err := lockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	_, err = StartStack(context.Background(), StackOptions{DataDir: dir, ControlPlaneListen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0", AgentListen: "127.0.0.1:0"})
	if !errors.Is(err, ErrDataInUse) {
		t.Fatalf("err = %v, want ErrDataInUse", err)
	}
}

// TestStackPassiveEvidence: receipts of the demo calls are folded into
// passive Evidence, signed with the observer key and stored.
func TestStackPassiveEvidence(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole stack")
	}
	st := startStackWith(t, StackOptions{DataDir: t.TempDir(), EvidenceWindow: 2 * time.Second})
	defer st.Close()
	if _, err := RunCalls(context.Background(), CallsOptions{AgentURL: st.AgentURL}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(45 * time.Second)
	for {
		resp, err := st.admin.Get(context.Background(), &mcpreadyv1.GetRequest{Kind: "Evidence"})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range resp.GetArtifacts() {
			if strings.HasPrefix(a.GetName(), "passive/") {
				v, err := sign.VerifyWithKey(a.GetBundle(), testKeys[KeyObserver].Public())
				if err != nil {
					t.Fatalf("%s: %v", a.GetName(), err)
				}
				ev := v.Object.Spec.(*mcpreadyv1.Evidence)
				if ev.GetMethod() != mcpreadyv1.EvidenceMethod_EVIDENCE_METHOD_PASSIVE || ev.GetSample().GetAttempted() == 0 {
					t.Fatalf("%s: method %s, sample %v", a.GetName(), ev.GetMethod(), ev.GetSample())
				}
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no passive evidence after 45s (%d evidence artifacts)", len(resp.GetArtifacts()))
		}
		time.Sleep(500 * time.Millisecond)
	}
}
