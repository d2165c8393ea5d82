package main

import (
	"context"
	"crypto"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/enroll"
	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/testpki"
	"github.com/mcpready/mcpready/sign"
)

// versionedServer serves a go-sdk server whose implementation version (and
// whether its read-only tool fails) the test changes between sessions.
type versionedServer struct {
	url, tool string
	current   atomic.Pointer[mcp.Server]
}

func (v *versionedServer) set(version string, failing bool) {
	s := mcp.NewServer(&mcp.Implementation{Name: "acme", Version: version}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: v.tool, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{IsError: failing, Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	v.current.Store(s)
}

func newVersionedServer(t *testing.T, tool, version string) *versionedServer {
	v := &versionedServer{tool: tool}
	v.set(version, false)
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return v.current.Load() }, nil))
	t.Cleanup(hs.Close)
	v.url = hs.URL
	return v
}

// reportDrift reports, as an agent does after tools/list, that entry now
// serves the identity enroll observes at url.
func reportDrift(t *testing.T, admin mcpreadyv1.AdminServiceClient, agentKey crypto.Signer, entry, url string) string {
	t.Helper()
	ctx := context.Background()
	server := entry[:strings.LastIndex(entry, "/")] // entries are SERVER/<tool>[+<drift>]
	srv, err := enroll.List(ctx, config.Upstream{Name: server, URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	fresh, err := srv.Entries("org", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cur, err := admin.Get(ctx, &mcpreadyv1.GetRequest{Kind: string(artifact.KindRegistryEntry), Name: entry})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := admin.ReportDrift(ctx, testpki.DriftReport(t, agentKey, "host-1", entry, artifact.Digest(cur.Artifacts[0].Bundle),
		[]mcpreadyv1.DriftLabel{mcpreadyv1.DriftLabel_DRIFT_LABEL_VERSION_DRIFT}, fresh[0].Spec.(*mcpreadyv1.RegistryEntry).GetIdentity(), time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetCandidateName()
}

// waitState waits until the control plane reports name in state want.
func waitState(t *testing.T, admin mcpreadyv1.AdminServiceClient, name string, want mcpreadyv1.LifecycleState) *mcpreadyv1.RegistryStatus {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := admin.RegistryStatus(context.Background(), &mcpreadyv1.RegistryStatusRequest{Name: name})
		if err == nil && r.Entries[0].GetState() == want {
			return r.Entries[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: state %v (%v), want %v", name, r.GetEntries(), err, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func storedEntry(t *testing.T, admin mcpreadyv1.AdminServiceClient, name string) (*mcpreadyv1.RegistryEntry, int64) {
	t.Helper()
	got, err := admin.Get(context.Background(), &mcpreadyv1.GetRequest{Kind: string(artifact.KindRegistryEntry), Name: name})
	if err != nil {
		t.Fatal(err)
	}
	obj, err := sign.Peek(got.Artifacts[0].Bundle)
	if err != nil {
		t.Fatal(err)
	}
	return obj.Spec.(*mcpreadyv1.RegistryEntry), got.Artifacts[0].Revision
}

// qualifyingControlPlane starts a control plane holding the test
// TrustPolicy and returns its address, the organisation key file (password
// "pw" in $MCPREADY_PASSWORD), an Admin client and the agent key the
// TrustPolicy grants drift reports for node "host-1".
func qualifyingControlPlane(t *testing.T) (addr, key string, admin mcpreadyv1.AdminServiceClient, agentKey crypto.Signer) {
	t.Helper()
	p := testpki.New(t)
	addr = startTestControlPlane(t, p, controlplane.Options{})
	dir := t.TempDir()
	if code, _, errOut := runKeyCLI(t, "apply", "-f", writeFile(t, dir, "trust.json", p.TrustPolicy), "--server", addr); code != exitOK {
		t.Fatalf("apply trust: %s", errOut)
	}
	t.Setenv("MCPREADY_PASSWORD", "pw")
	pem, _ := sign.MarshalPrivateKey(p.Org, []byte("pw"))
	key = writeFile(t, dir, "org.key", pem)
	conn, err := (&serverOptions{server: addr}).dial()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return addr, key, mcpreadyv1.NewAdminServiceClient(conn), p.Agent
}

// TestRequalifyPromotesDriftCandidate: a server enrolled and qualified at
// 2.4.1 changes to 2.5.0, an agent reports the drift, and re-qualifying
// promotes the drift candidate to a QUALIFIED entry of its own with its own
// qualification Evidence, while the 2.4.1 entry stays SUSPENDED and its
// name keeps pinning 2.4.1. Before, re-running enroll --qualify wrote 2.5.0
// over the 2.4.1 entry's name (here: refused as a rollback) and the
// candidate stayed a candidate. A failing fixture refuses the promotion
// and writes nothing; a new identity no drift report names is refused.
func TestRequalifyPromotesDriftCandidate(t *testing.T) {
	addr, key, admin, agentKey := qualifyingControlPlane(t)
	srv := newVersionedServer(t, "echo", "2.4.1")
	qualified := mcpreadyv1.LifecycleState_LIFECYCLE_STATE_QUALIFIED

	if code, _, errOut := runKeyCLI(t, "enroll", "--url", srv.url, "--name", "acme", "--key", key, "--qualify", "--server", addr); code != exitOK {
		t.Fatalf("enroll: %d %s", code, errOut)
	}
	waitState(t, admin, "acme/echo", qualified)
	// Enrolling again without qualifying would demote the entry: refused.
	if code, _, errOut := runKeyCLI(t, "enroll", "--url", srv.url, "--name", "acme", "--key", key, "--server", addr); code != exitUsage || !strings.Contains(errOut, "already enrolled") {
		t.Fatalf("re-enroll without --qualify: %d %s", code, errOut)
	}
	// Same identity: the next revision of the same name, fresh evidence.
	code, out, errOut := runKeyCLI(t, "registry", "qualify", "acme/echo", "--key", key, "--server", addr, "-o", "json")
	if code != exitOK || !strings.Contains(out, `"qualification/acme/echo"`) {
		t.Fatalf("registry qualify (same identity): %d %s %s", code, out, errOut)
	}
	if e, rev := storedEntry(t, admin, "acme/echo"); rev != 2 || e.GetProvenance().GetVersion() != "2" || e.GetState() != qualified {
		t.Fatalf("renewed entry: revision %d %v", rev, e)
	}

	srv.set("2.5.0", false)
	cand := reportDrift(t, admin, agentKey, "acme/echo", srv.url)
	waitState(t, admin, "acme/echo", mcpreadyv1.LifecycleState_LIFECYCLE_STATE_SUSPENDED)
	waitState(t, admin, cand, mcpreadyv1.LifecycleState_LIFECYCLE_STATE_CANDIDATE)
	_, oldRev := storedEntry(t, admin, "acme/echo")

	code, out, errOut = runKeyCLI(t, "registry", "qualify", "acme/echo", "--key", key, "--server", addr)
	if code != exitOK || !strings.Contains(out, cand) || !strings.Contains(out, "qualification/"+cand) {
		t.Fatalf("registry qualify (drifted): %d %s %s", code, out, errOut)
	}
	st := waitState(t, admin, cand, qualified)
	e, _ := storedEntry(t, admin, cand)
	if e.GetIdentity().GetServerVersion() != "2.5.0" || e.GetSupersedes() != "acme/echo" || e.GetQualification().GetEvidenceRef() != "qualification/"+cand ||
		st.GetLastEvidenceAt() == nil {
		t.Fatalf("promoted candidate: %v (status %v)", e, st)
	}
	old, rev := storedEntry(t, admin, "acme/echo")
	if rev != oldRev || old.GetIdentity().GetServerVersion() != "2.4.1" {
		t.Fatalf("the old entry's name was rewritten: revision %d→%d, %v", oldRev, rev, old)
	}
	waitState(t, admin, "acme/echo", mcpreadyv1.LifecycleState_LIFECYCLE_STATE_SUSPENDED)
	got, err := admin.Get(context.Background(), &mcpreadyv1.GetRequest{Kind: string(artifact.KindEvidence), Name: "qualification/" + cand})
	if err != nil {
		t.Fatal(err)
	}
	evObj, _ := sign.Peek(got.Artifacts[0].Bundle)
	ev := evObj.Spec.(*mcpreadyv1.Evidence)
	if ev.GetMethod() != mcpreadyv1.EvidenceMethod_EVIDENCE_METHOD_SYNTHETIC || ev.GetSubject().GetServerVersion() != "2.5.0" || ev.GetExpiresAt() == nil ||
		!strings.Contains(ev.GetObserver().GetSoftware(), enroll.Suite) {
		t.Fatalf("qualification evidence: %v", ev)
	}
	// enroll --qualify finds the promoted candidate the same way.
	if code, out, errOut := runKeyCLI(t, "enroll", "--url", srv.url, "--name", "acme", "--key", key, "--qualify", "--server", addr); code != exitOK || !strings.Contains(out, cand) {
		t.Fatalf("enroll --qualify after promotion: %d %s %s", code, out, errOut)
	}

	// 2.6.0 fails its safe call: the promotion is refused with the fixture.
	srv.set("2.6.0", true)
	cand2 := reportDrift(t, admin, agentKey, cand, srv.url)
	waitState(t, admin, cand2, mcpreadyv1.LifecycleState_LIFECYCLE_STATE_CANDIDATE)
	_, candRev := storedEntry(t, admin, cand2)
	code, _, errOut = runKeyCLI(t, "registry", "qualify", "acme/echo", "--key", key, "--server", addr)
	if code != exitVerify || !strings.Contains(errOut, "echo:safe-call") || !strings.Contains(errOut, "nothing written") {
		t.Fatalf("failing re-qualification: %d %s", code, errOut)
	}
	if _, rev := storedEntry(t, admin, cand2); rev != candRev {
		t.Fatal("a refused re-qualification wrote the candidate")
	}
	if _, err := admin.Get(context.Background(), &mcpreadyv1.GetRequest{Kind: string(artifact.KindEvidence), Name: "qualification/" + cand2}); err == nil {
		t.Fatal("a refused re-qualification wrote evidence")
	}

	// 2.7.0 without a drift report: no candidate pins it, refused.
	srv.set("2.7.0", false)
	code, _, errOut = runKeyCLI(t, "registry", "qualify", cand, "--key", key, "--server", addr)
	if code != exitVerify || !strings.Contains(errOut, "no drift candidate") {
		t.Fatalf("unreported identity: %d %s", code, errOut)
	}
	if code, _, _ := runKeyCLI(t, "registry", "qualify", "acme/none", "--key", key, "--server", addr); code != exitError {
		t.Fatalf("unknown entry: exit %d", code)
	}
	if code, _, _ := runKeyCLI(t, "registry", "qualify", "acme/echo", "--server", addr, "--key", ""); code != exitUsage {
		t.Fatalf("without --key: exit %d", code)
	}
}

// docSteps returns the mcpready command lines of the sh blocks of the
// "Qualify and re-qualify" section of docs/operator.md.
func docSteps(t *testing.T) [][][]string {
	t.Helper()
	b, err := os.ReadFile("../../docs/operator.md")
	if err != nil {
		t.Fatal(err)
	}
	sec := string(b)
	i := strings.Index(sec, "### Qualify and re-qualify")
	if i < 0 {
		t.Fatal("docs/operator.md has no Qualify and re-qualify section")
	}
	sec = sec[i:]
	sec = sec[:strings.Index(sec, "\n## ")]
	var blocks [][][]string
	for _, part := range strings.Split(sec, "```sh\n")[1:] {
		var cmds [][]string
		for _, l := range strings.Split(part[:strings.Index(part, "```")], "\n") {
			if args := docArgs(l); len(args) > 0 {
				cmds = append(cmds, args)
			}
		}
		blocks = append(blocks, cmds)
	}
	return blocks
}

// TestOperatorQualificationSteps runs the qualification steps of
// docs/operator.md as written (the example URL and key path replaced),
// with the server changing version between the two blocks as the guide
// describes.
func TestOperatorQualificationSteps(t *testing.T) {
	blocks := docSteps(t)
	if len(blocks) != 2 || len(blocks[0]) != 3 || len(blocks[1]) != 3 {
		t.Fatalf("expected two blocks of three steps, got %v", blocks)
	}
	addr, key, admin, agentKey := qualifyingControlPlane(t)
	srv := newVersionedServer(t, "lookup", "2.4.1")
	run := func(args []string) string {
		var a []string
		for _, x := range args {
			a = append(a, strings.NewReplacer("https://mcp.example.com/mcp", srv.url, "keys/org.key", key).Replace(x))
		}
		code, out, errOut := runKeyCLI(t, append(a, "--server", addr)...)
		if code != exitOK {
			t.Fatalf("mcpready %v: exit %d: %s", args, code, errOut)
		}
		return out
	}
	for _, args := range blocks[0] {
		run(args)
	}
	entry := "com.example/search/lookup"
	waitState(t, admin, entry, mcpreadyv1.LifecycleState_LIFECYCLE_STATE_QUALIFIED)
	srv.set("2.5.0", false)
	cand := reportDrift(t, admin, agentKey, entry, srv.url)
	waitState(t, admin, entry, mcpreadyv1.LifecycleState_LIFECYCLE_STATE_SUSPENDED)
	if out := run(blocks[1][0]); !strings.Contains(out, cand) || !strings.Contains(out, "SUSPENDED") {
		t.Fatalf("step 4: %s", out)
	}
	run(blocks[1][1])
	waitState(t, admin, cand, mcpreadyv1.LifecycleState_LIFECYCLE_STATE_QUALIFIED)
	if out := run(blocks[1][2]); !strings.Contains(out, cand) {
		t.Fatalf("step 6: %s", out)
	}
}
