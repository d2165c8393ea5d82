package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/oauthtest"
	"github.com/mcpready/mcpready/internal/testpki"
	"github.com/mcpready/mcpready/probe"
	"github.com/mcpready/mcpready/prober"
	"github.com/mcpready/mcpready/sign"
)

// TestProbeCommand probes a real go-sdk server: the read-only tool named is
// called with the token from the file, the report is JSON with every layer,
// and the exit code says whether every measured layer is ready.
func TestProbeCommand(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "com.example/docs", Version: "1"}, nil)
	type in struct {
		Q string `json:"q"`
	}
	called := 0
	mcp.AddTool(s, &mcp.Tool{Name: "lookup"}, func(context.Context, *mcp.CallToolRequest, in) (*mcp.CallToolResult, any, error) {
		called++
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	})
	var auth string
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		h.ServeHTTP(w, r)
	}))
	defer ts.Close()
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runKeyCLI(t, "probe", "--url", ts.URL, "--read-only", "lookup", "--token-file", tok, "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	var r probe.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Layers) != len(probe.Layers()) || r.Layer(probe.LayerInvocation).Status != probe.Ready || called != 1 || auth != "Bearer s3cret" {
		t.Fatalf("layers %+v called %d auth %q", r.Layers, called, auth)
	}
	if strings.Contains(out, "s3cret") {
		t.Fatal("the token is in the report")
	}
	code, out, _ = runKeyCLI(t, "probe", "--url", ts.URL)
	if code != exitOK || !strings.Contains(out, "no-read-only-tool") || !strings.Contains(out, "era 2026-07-28:") || called != 1 {
		t.Fatalf("exit %d called %d:\n%s", code, called, out)
	}
	t.Setenv("MCPREADY_PROBE_TOKEN", "from-env")
	if code, _, _ = runKeyCLI(t, "probe", "--url", ts.URL); code != exitOK || auth != "Bearer from-env" {
		t.Fatalf("token from the environment: exit %d, Authorization %q", code, auth)
	}
	// A token file with no token is a usage error, not a keyless run.
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, _ = runKeyCLI(t, "probe", "--url", ts.URL, "--token-file", empty); code != exitUsage || called != 1 {
		t.Fatalf("empty token file: exit %d, called %d", code, called)
	}
}

// TestProbeEvidence signs a probe run as SYNTHETIC Evidence, writes it,
// verifies it offline, and applies it to a control plane that grants the
// prober key Evidence.
func TestProbeEvidence(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "com.example/docs", Version: "3"}, nil)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	defer ts.Close()
	p := testpki.New(t)
	addr := startTestControlPlane(t, p, controlplane.Options{})
	dir := t.TempDir()
	tp := writeFile(t, dir, "trust.json", p.TrustPolicy)
	if code, _, errOut := runKeyCLI(t, "apply", "-f", tp, "--server", addr); code != exitOK {
		t.Fatalf("apply trust: %s", errOut)
	}
	t.Setenv("MCPREADY_PASSWORD", "pw")
	pem, err := sign.MarshalPrivateKey(p.Prober, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	key := writeFile(t, dir, "org.key", pem)
	bundle := filepath.Join(dir, "ev.bundle.json")
	// The server has no RegistryEntry: the registry layer is not ready (exit
	// 1), and the Evidence saying so is applied all the same.
	code, out0, errOut := runKeyCLI(t, "probe", "--url", ts.URL, "--name", "com.example/docs", "--sign", key, "--observer", "org/prober",
		"--bundle", bundle, "--apply", "--server", addr)
	if code != exitError || !strings.Contains(errOut, "evidence probe/com.example/docs applied (revision 1)") {
		t.Fatalf("probe --sign: %d %s\n%s", code, errOut, out0)
	}
	v, err := sign.VerifyWithKey(mustRead(t, bundle), p.Prober.Public())
	if err != nil || v.Object.Kind != artifact.KindEvidence {
		t.Fatalf("bundle: %v", err)
	}
	if m := v.Object.Spec.(*mcpreadyv1.Evidence).GetMethod(); m != mcpreadyv1.EvidenceMethod_EVIDENCE_METHOD_SYNTHETIC {
		t.Fatalf("method %v", m)
	}
	if code, out, _ := runKeyCLI(t, "get", "Evidence", "probe/com.example/docs", "--server", addr); code != exitOK || !strings.Contains(out, "probe/com.example/docs") {
		t.Fatalf("get: %d %s", code, out)
	}
	for _, bad := range [][]string{
		{"probe", "--url", ts.URL, "--apply"},
		{"probe", "--url", ts.URL, "--sign", key},
		{"probe", "--url", ts.URL, "--sign", key, "--observer", "o"},
	} {
		if code, _, _ := runKeyCLI(t, bad...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", bad, code, exitUsage)
		}
	}
}

func TestProbeAnalyze(t *testing.T) {
	dir := t.TempDir()
	csvData := analyzeHeader + "\n" +
		"a,A,https://a.example/mcp,,3,true,true,100,250,ping,2026-09-14T09:23:21Z,0\n" +
		"b,B,https://b.example/mcp,https://b.example,12,true,false,200,,,2026-09-14T09:23:31Z,3\n"
	file := writeFile(t, dir, "p.csv", []byte(csvData))
	sum := sha256.Sum256([]byte(csvData))
	hexSum := hex.EncodeToString(sum[:])
	svg := filepath.Join(dir, "p.svg")
	code, out, errOut := runKeyCLI(t, "probe", "analyze", file, "--sha256", hexSum, "--svg", svg, "-o", "json")
	if code != exitOK {
		t.Fatalf("analyze: %d %s", code, errOut)
	}
	var r struct {
		Records int
		Listed  struct{ N, Denominator int }
		Called  struct{ N int }
		Label   string
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Records != 2 || r.Listed.N != 2 || r.Called.N != 1 || !strings.Contains(r.Label, "not availability") {
		t.Fatalf("%v %+v", err, r)
	}
	if b := mustRead(t, svg); !strings.HasPrefix(string(b), "<svg") {
		t.Fatalf("svg %q", b[:min(len(b), 40)])
	}
	code, out, _ = runKeyCLI(t, "probe", "analyze", file, "--sha256", hexSum)
	if code != exitOK || !strings.Contains(out, "1 of 2 records (50.000%)") {
		t.Fatalf("table: %d\n%s", code, out)
	}
	bad := writeFile(t, dir, "bad.csv", []byte("server,x\n"))
	for _, c := range []exitCase{
		{[]string{"probe", "analyze"}, exitUsage},
		{[]string{"probe", "analyze", file, "-o", "xml"}, exitUsage},
		{[]string{"probe", "analyze", file}, exitVerify}, // not the frozen file's digest
		{[]string{"probe", "analyze", filepath.Join(dir, "missing.csv")}, exitError},
		{[]string{"probe", "analyze", bad, "--sha256", hexOf(t, bad)}, exitError},
	} {
		if code, _, errOut := runKeyCLI(t, c.args...); code != c.code {
			t.Errorf("%v: exit %d, want %d (%s)", c.args, code, c.code, errOut)
		}
	}
}

const analyzeHeader = "server,title,url,website,tools,list_ok,call_ok,list_ms,call_ms,probed_tool,probed_at,streak"

func hexOf(t *testing.T, file string) string {
	s := sha256.Sum256(mustRead(t, file))
	return hex.EncodeToString(s[:])
}

// TestProberOnce runs one prober round against a control plane holding a
// RegistryEntry whose endpoint is a real go-sdk server: the READ_ONLY tool
// is called, the Evidence is applied and readable.
func TestProberOnce(t *testing.T) {
	_, addr, key, calls := registeredEndpoint(t, "s", "t", "4")
	code, _, errOut := runKeyCLI(t, "prober", "--once", "--sign", key, "--observer", "org/prober", "--server", addr)
	if code != exitOK || !strings.Contains(errOut, "ran 1 probe(s)") || *calls != 1 {
		t.Fatalf("prober: %d calls=%d %s", code, *calls, errOut)
	}
	// The endpoint came from the registry: the registry layer is measured
	// (present), and the Evidence names the probed tool's record version.
	ev := getEvidence(t, addr, "probe/s")
	if ev.GetSubject().GetRegistryRecordVersion() != "4" || !hasRate(ev, mcpreadyv1.ReadinessLayer_READINESS_LAYER_REGISTRY, 1) {
		t.Fatalf("evidence subject %v, rates %v: want record version 4 and the registry layer present", ev.GetSubject(), ev.GetRates())
	}
	if code, _, _ := runKeyCLI(t, "prober", "--once", "--server", addr); code != exitUsage {
		t.Errorf("without --sign: exit %d", code)
	}
	for _, bad := range []string{"s", "=f", "s=", "s=a"} {
		args := []string{"prober", "--once", "--sign", key, "--observer", "org/prober", "--server", addr, "--token-file", bad}
		if bad == "s=a" {
			args = append(args, "--token-file", "s=b")
		}
		if code, _, _ := runKeyCLI(t, args...); code != exitUsage || *calls != 1 {
			t.Errorf("--token-file %s: exit %d, calls %d; want a usage error before any probe", bad, code, *calls)
		}
	}
	// OAuth settings are read before any probe: a file that is missing,
	// malformed or names a grant acting for someone else, and a server
	// named twice or with a token file too, are usage errors.
	dir := t.TempDir()
	ok := writeFile(t, dir, "ok.yaml", []byte("grant: client_credentials\nclientID: p\nclientSecretFile: /nonexistent\n"))
	exchange := writeFile(t, dir, "exchange.yaml", []byte("grant: token_exchange\nclientID: p\nclientSecretFile: /nonexistent\n"))
	unknown := writeFile(t, dir, "unknown.yaml", []byte("grant: client_credentials\nclientID: p\nsecret: x\n"))
	for _, bad := range [][]string{{"--oauth", "s=" + filepath.Join(dir, "missing")}, {"--oauth", "s=" + exchange}, {"--oauth", "s=" + unknown},
		{"--oauth", "s=" + ok, "--oauth", "s=" + ok}, {"--oauth", "s=" + ok, "--token-file", "s=" + ok}, {"--oauth", "s"}} {
		args := append([]string{"prober", "--once", "--sign", key, "--observer", "org/prober", "--server", addr}, bad...)
		if code, _, errOut := runKeyCLI(t, args...); code != exitUsage || *calls != 1 {
			t.Errorf("%v: exit %d, calls %d; want a usage error before any probe (%s)", bad, code, *calls, errOut)
		}
	}
	// A token file is read at every round: a missing one leaves its
	// server's endpoint unprobed (logged), the round still ends.
	code, _, errOut = runKeyCLI(t, "prober", "--once", "--sign", key, "--observer", "org/prober", "--server", addr,
		"--token-file", "s="+filepath.Join(t.TempDir(), "missing"))
	if code != exitOK || *calls != 1 || !strings.Contains(errOut, "its token file cannot be used") {
		t.Errorf("missing token file: exit %d, calls %d: %s", code, *calls, errOut)
	}
}

// prober --ca FILE trusts the file's CA certificates beside the system
// roots: an endpoint whose certificate only they issue is probed through
// the whole funnel (its read-only tool called) with them, and not past
// TLS without them. A file with no certificate is a usage error.
func TestProberCA(t *testing.T) {
	ts, addr, key, calls := registered(t, "s", "t", "1", true)
	base := []string{"prober", "--once", "--sign", key, "--observer", "org/prober", "--server", addr}
	if code, _, errOut := runKeyCLI(t, base...); code != exitOK || *calls != 0 {
		t.Fatalf("without --ca: exit %d, calls %d: %s", code, *calls, errOut)
	}
	if ev := getEvidence(t, addr, "probe/s"); hasRate(ev, mcpreadyv1.ReadinessLayer_READINESS_LAYER_REACHABILITY, 1) {
		t.Fatalf("without --ca the endpoint's certificate was trusted: %v", ev.GetRates())
	}
	dir := t.TempDir()
	ca := writeFile(t, dir, "ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw}))
	if code, _, errOut := runKeyCLI(t, append(base, "--ca", ca)...); code != exitOK || *calls != 1 {
		t.Fatalf("with --ca: exit %d, calls %d: %s", code, *calls, errOut)
	}
	if ev := getEvidence(t, addr, "probe/s"); !hasRate(ev, mcpreadyv1.ReadinessLayer_READINESS_LAYER_REACHABILITY, 1) {
		t.Fatalf("with --ca: rates %v", ev.GetRates())
	}
	if code, _, _ := runKeyCLI(t, append(base, "--ca", writeFile(t, dir, "empty.pem", []byte("no certificate\n")))...); code != exitUsage {
		t.Errorf("--ca without a certificate: exit %d", code)
	}
}

// probe --arguments FILE --input-class NAME calls the read-only tool with
// the file's arguments, reports the class (never the arguments) and names
// the signed Evidence for it; a class without arguments, a name no Policy
// accepts, or a file that is not a JSON object is a usage error.
func TestProbeInputClass(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "com.example/docs", Version: "1"}, nil)
	type in struct {
		Q string `json:"q"`
	}
	var got []string
	mcp.AddTool(s, &mcp.Tool{Name: "lookup"}, func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		got = append(got, a.Q)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true}))
	defer ts.Close()
	dir := t.TempDir()
	args := writeFile(t, dir, "args.json", []byte(`{"q":"a-very-particular-query"}`))
	code, out, errOut := runKeyCLI(t, "probe", "--url", ts.URL, "--read-only", "lookup", "--arguments", args, "--input-class", "bulk", "-o", "json")
	if code != exitOK || len(got) != 1 || got[0] != "a-very-particular-query" {
		t.Fatalf("exit %d, tool got %q: %s %s", code, got, out, errOut)
	}
	var r probe.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.InputClass != "bulk" || strings.Contains(out, "a-very-particular-query") {
		t.Fatalf("report: %v, input class %q; the arguments must not be in it:\n%s", err, r.InputClass, out)
	}
	for _, bad := range [][]string{
		{"probe", "--url", ts.URL, "--read-only", "lookup", "--input-class", "bulk"},
		{"probe", "--url", ts.URL, "--read-only", "lookup", "--arguments", args, "--input-class", "Bulk Calls"},
		{"probe", "--url", ts.URL, "--read-only", "lookup", "--arguments", writeFile(t, dir, "list.json", []byte(`[1,2]`))},
		{"probe", "--url", ts.URL, "--read-only", "lookup", "--arguments", filepath.Join(dir, "missing.json")},
	} {
		if code, _, _ := runKeyCLI(t, bad...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", bad[len(bad)-2:], code, exitUsage)
		}
	}
	if len(got) != 1 {
		t.Fatalf("refused runs called the tool: %q", got)
	}
}

// getEvidence reads the stored Evidence name from the control plane at addr.
func getEvidence(t *testing.T, addr, name string) *mcpreadyv1.Evidence {
	t.Helper()
	dir := t.TempDir()
	code, _, errOut := runKeyCLI(t, "get", "Evidence", name, "--bundles", dir, "--server", addr)
	if code != exitOK {
		t.Fatalf("get Evidence %s: exit %d %s", name, code, errOut)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(files) != 1 {
		t.Fatalf("get --bundles wrote %v", files)
	}
	obj, err := sign.Peek(mustRead(t, files[0]))
	if err != nil {
		t.Fatal(err)
	}
	return obj.Spec.(*mcpreadyv1.Evidence)
}

// hasRate reports whether ev rates layer with the given successes of one.
func hasRate(ev *mcpreadyv1.Evidence, layer mcpreadyv1.ReadinessLayer, successes int64) bool {
	for _, r := range ev.GetRates() {
		if r.GetLayer() == layer {
			return r.GetDenominator() == 1 && r.GetSuccesses() == successes
		}
	}
	return false
}

// TestProbeRegistryLayer: probe --apply asks the control plane's registry.
// A server with an entry at the URL is present and the Evidence names the
// probed tool's record version, so it stops counting once the entry is
// republished; a server with no entry there is absent, and the run is not
// ready.
func TestProbeRegistryLayer(t *testing.T) {
	ts, addr, key, _ := registeredEndpoint(t, "com.example/docs", "lookup", "7")
	probeRun := func(name string) (int, probe.Report) {
		t.Helper()
		code, out, errOut := runKeyCLI(t, "probe", "--url", ts.URL, "--name", name, "--read-only", "lookup",
			"--sign", key, "--observer", "org/prober", "--apply", "--server", addr, "-o", "json")
		var r probe.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("probe --name %s: exit %d, %v: %s %s", name, code, err, out, errOut)
		}
		return code, r
	}
	code, r := probeRun("com.example/docs")
	if l := r.Layer(probe.LayerRegistry); code != exitOK || l.Status != probe.Ready || r.RegistryRecordVersion != "7" {
		t.Fatalf("registered: exit %d, registry layer %+v, record version %q", code, l, r.RegistryRecordVersion)
	}
	if ev := getEvidence(t, addr, "probe/com.example/docs"); ev.GetSubject().GetRegistryRecordVersion() != "7" {
		t.Fatalf("evidence subject %v, want record version 7", ev.GetSubject())
	}
	code, r = probeRun("com.example/elsewhere")
	if l := r.Layer(probe.LayerRegistry); code != exitError || l.Status != probe.NotReady || l.Reason != "absent" || r.RegistryRecordVersion != "" {
		t.Fatalf("not registered: exit %d, registry layer %+v, record version %q", code, l, r.RegistryRecordVersion)
	}
}

// prober --canaries calls the registry's READ_ONLY tool once more with the
// canary's arguments and applies Evidence for its input class; a canary
// for a tool the registry does not have as READ_ONLY is not called and is
// named in a warning; the arguments appear in no output; a bad canary
// file is a usage error before anything is probed.
func TestProberCanaries(t *testing.T) {
	_, addr, key, calls := registeredEndpoint(t, "s", "t", "5")
	dir := t.TempDir()
	const secret = "a-canary-secret-query"
	canaries := writeFile(t, dir, "canaries.yaml", []byte(`
- {server: s, tool: t, inputClass: long-query, arguments: {q: `+secret+`}}
- {server: s, tool: write, inputClass: bulk, arguments: {q: `+secret+`}}
`))
	code, out, errOut := runKeyCLI(t, "prober", "--once", "--canaries", canaries, "--sign", key, "--observer", "org/prober", "--server", addr)
	if code != exitOK || !strings.Contains(errOut, "ran 2 probe(s)") || *calls != 2 {
		t.Fatalf("prober: %d calls=%d %s", code, *calls, errOut)
	}
	// No Policy defines the classes: the Evidence would count for no call,
	// and the prober says so.
	if !strings.Contains(errOut, "input class is defined by no Policy") || !strings.Contains(errOut, "inputClass=long-query") {
		t.Fatalf("want a warning that no Policy defines long-query:\n%s", errOut)
	}
	if !strings.Contains(errOut, "canary not probed") || !strings.Contains(errOut, "tool=write") || strings.Contains(out+errOut, secret) {
		t.Fatalf("want one warning naming the unmatched canary and no arguments:\n%s%s", out, errOut)
	}
	ev := getEvidence(t, addr, "probe/s/input-class/long-query")
	if sub := ev.GetSubject(); sub.GetInputClass() != "long-query" || sub.GetRegistryRecordVersion() != "5" || sub.GetToolName() != "t" {
		t.Fatalf("canary evidence subject %v", sub)
	}
	if ev := getEvidence(t, addr, "probe/s"); ev.GetSubject().GetInputClass() != "" {
		t.Fatalf("registry evidence subject %v", ev.GetSubject())
	}
	bad := writeFile(t, dir, "bad.yaml", []byte(`[{server: s, tool: t, inputClass: "Long Query", arguments: {q: `+secret+`}}]`))
	code, out, errOut = runKeyCLI(t, "prober", "--once", "--canaries", bad, "--sign", key, "--observer", "org/prober", "--server", addr)
	if code != exitUsage || *calls != 2 || strings.Contains(out+errOut, secret) {
		t.Fatalf("bad canary file: exit %d, calls %d: %s%s", code, *calls, out, errOut)
	}
}

// registeredEndpoint serves MCP server with one tool and starts a control
// plane holding the test TrustPolicy and a READ_ONLY, qualified
// RegistryEntry for that tool at the server's URL, at record version
// version. It returns the server, the control plane's address, the
// prober's key file (password "pw" in $MCPREADY_PASSWORD) and the count of
// the tool's calls.
func registeredEndpoint(t *testing.T, server, tool, version string) (*httptest.Server, string, string, *int) {
	t.Helper()
	return registered(t, server, tool, version, false)
}

// registered is registeredEndpoint, the endpoint served over TLS (with
// httptest's own certificate) when tlsOn.
func registered(t *testing.T, server, tool, version string, tlsOn bool) (*httptest.Server, string, string, *int) {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: server, Version: "1"}, nil)
	type in struct {
		Q string `json:"q"`
	}
	calls := new(int)
	mcp.AddTool(s, &mcp.Tool{Name: tool}, func(context.Context, *mcp.CallToolRequest, in) (*mcp.CallToolResult, any, error) {
		*calls++
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	})
	ts := httptest.NewUnstartedServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	if tlsOn {
		ts.StartTLS()
	} else {
		ts.Start()
	}
	t.Cleanup(ts.Close)
	p := testpki.New(t)
	addr := startTestControlPlane(t, p, controlplane.Options{})
	dir := t.TempDir()
	if code, _, errOut := runKeyCLI(t, "apply", "-f", writeFile(t, dir, "trust.json", p.TrustPolicy), "--server", addr); code != exitOK {
		t.Fatalf("apply trust: %s", errOut)
	}
	entry := artifact.New(artifact.KindRegistryEntry, server+"/"+tool, &mcpreadyv1.RegistryEntry{
		Provenance: &mcpreadyv1.Provenance{Version: version},
		Identity:   &mcpreadyv1.ToolIdentity{ServerName: server, ServerVersion: "1", ToolName: tool, Endpoint: ts.URL},
		SideEffect: mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY, State: mcpreadyv1.LifecycleState_LIFECYCLE_STATE_QUALIFIED})
	b, _, err := sign.Sign(entry, p.Org)
	if err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runKeyCLI(t, "apply", "-f", writeFile(t, dir, "entry.json", b), "--server", addr); code != exitOK {
		t.Fatalf("apply entry: %s", errOut)
	}
	t.Setenv("MCPREADY_PASSWORD", "pw")
	pem, _ := sign.MarshalPrivateKey(p.Prober, []byte("pw"))
	return ts, addr, writeFile(t, dir, "prober.key", pem), calls
}

// registration answers the registry layer from the entries naming the
// server at the endpoint, and gives each tool its entry's record version,
// except a tool two entries there give different versions (the probe
// cannot tell which one it met).
func TestRegistration(t *testing.T) {
	entry := func(server, tool, endpoint, version string) *mcpreadyv1.RegistryEntry {
		return &mcpreadyv1.RegistryEntry{Provenance: &mcpreadyv1.Provenance{Version: version},
			Identity: &mcpreadyv1.ToolIdentity{ServerName: server, ToolName: tool, Endpoint: endpoint}}
	}
	const u = "https://docs.example/mcp"
	entries := []*mcpreadyv1.RegistryEntry{
		entry("docs", "lookup", u, "3"),
		entry("docs", "search", u, "4"), entry("docs", "search", u, "5"), // two versions: unknown
		entry("docs", "fetch", "https://elsewhere.example/mcp", "6"), // another endpoint
		entry("other", "list", u, "7"),                               // another server
	}
	o := probe.Options{Server: "docs"}
	registration(entries, &o, u)
	if ok, err := o.Registered(context.Background(), "docs"); !ok || err != nil {
		t.Fatalf("registered %v %v", ok, err)
	}
	if fmt.Sprint(o.RecordVersions) != "map[lookup:3]" {
		t.Fatalf("record versions %v, want lookup's alone", o.RecordVersions)
	}
	o = probe.Options{Server: "docs"}
	registration(entries, &o, "https://unknown.example/mcp")
	if ok, _ := o.Registered(context.Background(), "docs"); ok || len(o.RecordVersions) != 0 {
		t.Fatalf("an endpoint no entry names: registered %v, versions %v", ok, o.RecordVersions)
	}
}

// undefinedClasses names the canaries whose input class no Policy defines.
func TestUndefinedClasses(t *testing.T) {
	canaries := []prober.Canary{{Server: "s", Tool: "t", InputClass: "bulk"}, {Server: "s", Tool: "t", InputClass: "long-query"}}
	policies := []*mcpreadyv1.Policy{{}, {InputClasses: []*mcpreadyv1.InputClassRule{{Name: "bulk", When: "true"}}}}
	if got := undefinedClasses(canaries, policies); len(got) != 1 || got[0].InputClass != "long-query" {
		t.Fatalf("undefined %+v, want long-query alone", got)
	}
	if got := undefinedClasses(canaries, nil); len(got) != 2 {
		t.Fatalf("with no Policy: %+v, want both", got)
	}
}

// probe --oauth FILE gets a token with an agent configuration's oauth
// block from a real authorization server and probes a real go-sdk server
// it protects: the access layer is ready and the report's auth class is
// oauth:client_credentials. A block that is malformed, names a grant that
// acts for someone else, or comes with --token-file is a usage error.
func TestProbeOAuth(t *testing.T) {
	as := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{{ID: "prober", Secret: "prober-s3cret"}}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + ln.Addr().String() + "/mcp"
	s := mcp.NewServer(&mcp.Implementation{Name: "com.example/docs", Version: "1"}, nil)
	hs := &httptest.Server{Listener: ln, Config: &http.Server{Handler: as.Protect(oauthtest.Resource{URL: u},
		mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))}}
	hs.Start()
	defer hs.Close()
	dir := t.TempDir()
	secret := writeFile(t, dir, "secret", []byte("prober-s3cret\n"))
	good := writeFile(t, dir, "oauth.yaml", []byte("grant: client_credentials\nclientID: prober\nclientSecretFile: "+secret+"\n"))
	code, out, errOut := runKeyCLI(t, "probe", "--url", u, "--oauth", good, "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	var r probe.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.AuthClass != "oauth:client_credentials" || r.Layer(probe.LayerAccess).Reason != "token-accepted" || as.Issued() != 1 {
		t.Fatalf("auth class %q, access %+v, tokens issued %d", r.AuthClass, r.Layer(probe.LayerAccess), as.Issued())
	}
	if strings.Contains(out+errOut, "s3cret") {
		t.Fatal("the client secret is in the output")
	}
	// The table names the auth class; $MCPREADY_PROBE_TOKEN is not read
	// when --oauth gets the token.
	t.Setenv("MCPREADY_PROBE_TOKEN", "from-env")
	if code, out, _ = runKeyCLI(t, "probe", "--url", u, "--oauth", good); code != exitOK || !strings.Contains(out, "oauth:client_credentials") {
		t.Fatalf("table: exit %d, want the auth class:\n%s", code, out)
	}
	for name, body := range map[string]string{
		"unknown field":  "grant: client_credentials\nclientID: prober\nclientSecretFile: " + secret + "\nclientSecret: x\n",
		"token exchange": "grant: token_exchange\nclientID: prober\nclientSecretFile: " + secret + "\n",
		"not yaml":       "grant: [\n",
		"empty":          "",
	} {
		f := writeFile(t, dir, "bad.yaml", []byte(body))
		if code, _, errOut := runKeyCLI(t, "probe", "--url", u, "--oauth", f); code != exitUsage {
			t.Errorf("%s: exit %d, want a usage error (%s)", name, code, errOut)
		}
	}
	if code, _, _ := runKeyCLI(t, "probe", "--url", u, "--oauth", good, "--token-file", secret); code != exitUsage {
		t.Errorf("--oauth with --token-file: exit %d", code)
	}
	if code, _, _ := runKeyCLI(t, "probe", "--url", "http://mcp.example/mcp", "--oauth", good); code != exitUsage {
		t.Errorf("--oauth for plain http off loopback: exit %d", code)
	}
	if n := as.Issued(); n != 2 {
		t.Errorf("tokens issued = %d, want one per run and none for the refused runs", n)
	}
}

// With --ca, probe --oauth trusts the file's CA certificates for the
// authorization server too (beside the system roots): a token from an
// https authorization server under a private PKI is obtained and presented
// to an https endpoint under it. Without --ca no token can be had (exit 1).
func TestProbeOAuthPrivatePKI(t *testing.T) {
	as := oauthtest.Start(t, oauthtest.Options{TLS: true, Clients: []oauthtest.Client{{ID: "prober", Secret: "prober-s3cret"}}})
	s := mcp.NewServer(&mcp.Implementation{Name: "com.example/docs", Version: "1"}, nil)
	var h http.Handler // set once the URL is known, before any request
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	ts.StartTLS()
	defer ts.Close()
	res := oauthtest.Resource{URL: ts.URL + "/mcp"}
	h = as.Protect(res, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	dir := t.TempDir()
	secret := writeFile(t, dir, "secret", []byte("prober-s3cret\n"))
	oauth := writeFile(t, dir, "oauth.yaml", []byte("grant: client_credentials\nclientID: prober\nclientSecretFile: "+secret+"\n"))
	ca := writeFile(t, dir, "ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: as.Certificate().Raw}))
	if code, _, errOut := runKeyCLI(t, "probe", "--url", res.URL, "--oauth", oauth); code != exitError || !strings.Contains(errOut, "no token") {
		t.Fatalf("without --ca: exit %d: %s", code, errOut)
	}
	code, out, errOut := runKeyCLI(t, "probe", "--url", res.URL, "--oauth", oauth, "--ca", ca, "-o", "json")
	if code != exitOK {
		t.Fatalf("with --ca: exit %d: %s %s", code, out, errOut)
	}
	var r probe.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.AuthClass != "oauth:client_credentials" || r.Layer(probe.LayerAccess).Reason != "token-accepted" || as.Issued() != 1 {
		t.Fatalf("auth class %q, access %+v, tokens issued %d", r.AuthClass, r.Layer(probe.LayerAccess), as.Issued())
	}
}
