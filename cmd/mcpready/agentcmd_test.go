package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/sign"
)

type echoIn struct {
	Text string `json:"text"`
}

// echoServer serves a go-sdk MCP server with one read-only and one write tool.
func echoServer(t *testing.T) string {
	t.Helper()
	_, url := echoMCPServer(t)
	return url
}

// echoMCPServer is echoServer that also returns the server.
func echoMCPServer(t *testing.T) (*mcp.Server, string) {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "2.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "store"}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "stored"}}}, nil, nil
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(hs.Close)
	return s, hs.URL
}

// What the server sends outside any request (here tools/list_changed) reaches
// the stdio client through the bridge's standalone stream.
func TestBridgeRelaysStandaloneStream(t *testing.T) {
	s, url := echoMCPServer(t)
	clientToBridge, bridgeIn := io.Pipe()
	bridgeOut, bridgeToClient := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- bridge(ctx, clientToBridge, bridgeToClient, url, "") }()
	changed := make(chan struct{}, 1)
	c := mcp.NewClient(&mcp.Implementation{Name: "stdio-client"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		}})
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: io.NopCloser(bridgeOut), Writer: bridgeIn}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	// The standalone stream opens after initialize; keep changing the tool
	// list until a notification gets through.
	deadline := time.After(10 * time.Second)
	for i := 0; ; i++ {
		mcp.AddTool(s, &mcp.Tool{Name: fmt.Sprintf("added%d", i)}, func(context.Context, *mcp.CallToolRequest, echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{}, nil, nil
		})
		select {
		case <-changed:
			return
		case <-deadline:
			t.Fatal("tools/list_changed sent outside a request never reached the stdio client")
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func TestBridgeRelaysBothWays(t *testing.T) {
	url := echoServer(t)
	clientToBridge, bridgeIn := io.Pipe()
	bridgeOut, bridgeToClient := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- bridge(ctx, clientToBridge, bridgeToClient, url, "tok") }()
	// A line that is not JSON-RPC gets a parse error; the bridge carries on.
	if _, err := bridgeIn.Write([]byte("not json\n")); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(bridgeOut)
	line, err := br.ReadString('\n')
	if err != nil || !strings.Contains(line, "-32700") {
		t.Fatalf("parse error reply: %q %v", line, err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "stdio-client"}, nil)
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: io.NopCloser(br), Writer: bridgeIn}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "via bridge"}})
	if err != nil || res.Content[0].(*mcp.TextContent).Text != "via bridge" {
		t.Fatalf("call through bridge: %v %+v", err, res)
	}
	bridgeIn.Close() // the client goes away: the bridge ends cleanly
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("bridge: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("bridge did not stop")
	}
}

func TestAgentEndpointAndLabels(t *testing.T) {
	if u, err := agentEndpoint("http://127.0.0.1:7480/", "com.example/docs"); err != nil || u != "http://127.0.0.1:7480/mcp/servers/com.example/docs" {
		t.Fatalf("%q %v", u, err)
	}
	if _, err := agentEndpoint("ftp://x", ""); err == nil {
		t.Fatal("non-http agent URL accepted")
	}
	l, err := parseLabels("region=eu-west, host=a")
	if err != nil || l["region"] != "eu-west" || l["host"] != "a" {
		t.Fatalf("%v %v", l, err)
	}
	if _, err := parseLabels("novalue"); err == nil {
		t.Fatal("label without = accepted")
	}
	// Found by FuzzParseLabels: the spaces around "=" were kept, so the
	// agent had no "region" label, and a second value replaced the first.
	if l, err := parseLabels("region = eu-west,0= 0"); err != nil || len(l) != 2 || l["region"] != "eu-west" || l["0"] != "0" {
		t.Fatalf("%q %v", l, err)
	}
	if _, err := parseLabels("region=eu-west,region=us-east"); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Fatalf("label given twice: %v", err)
	}
	// A label with several values (tenant-classes, nodelabel.Split): the
	// items after it without "=" are its values. Before, "b" was refused,
	// so an agent could not be scoped to two tenant classes.
	if l, err := parseLabels("tenant-classes=a, b,region=eu-west"); err != nil || l["tenant-classes"] != "a,b" || l["region"] != "eu-west" {
		t.Fatalf("%q %v", l, err)
	}
}

func TestEnrollQualifyNoApply(t *testing.T) {
	url := echoServer(t)
	dir := t.TempDir()
	t.Setenv("MCPREADY_PASSWORD", "")
	key, err := sign.WriteKeyPair(filepath.Join(dir, "org"), sign.AlgorithmEd25519, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	code, stdout, stderr := runKeyCLI(t, "enroll", "--url", url+"/", "--name", "acme", "--key", filepath.Join(dir, "org.key"),
		"--qualify", "--no-apply", "--bundles", out)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "acme/echo") || !strings.Contains(stdout, "QUALIFIED") {
		t.Fatalf("output: %s", stdout)
	}
	b, err := os.ReadFile(filepath.Join(out, "acme_echo.bundle.json"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := sign.VerifyWithKey(b, key.Public())
	if err != nil {
		t.Fatal(err)
	}
	e := v.Object.Spec.(*mcpreadyv1.RegistryEntry)
	if v.Object.Kind != artifact.KindRegistryEntry || e.GetState() != mcpreadyv1.LifecycleState_LIFECYCLE_STATE_QUALIFIED ||
		e.GetQualification().GetFixturesTotal() < 3 || !strings.HasPrefix(e.GetIdentity().GetDefinitionDigest(), "sha256:") {
		t.Fatalf("entry: %v", e)
	}
	// The qualification is written as Evidence the entry names, with an expiry.
	if e.GetQualification().GetEvidenceRef() != "qualification/acme/echo" {
		t.Fatalf("evidence_ref %q", e.GetQualification().GetEvidenceRef())
	}
	b, err = os.ReadFile(filepath.Join(out, "qualification_acme_echo.bundle.json"))
	if err != nil {
		t.Fatal(err)
	}
	if v, err = sign.VerifyWithKey(b, key.Public()); err != nil || v.Object.Metadata.Name != "qualification/acme/echo" {
		t.Fatalf("evidence bundle: %v", err)
	}
	ev := v.Object.Spec.(*mcpreadyv1.Evidence)
	if ev.GetMethod() != mcpreadyv1.EvidenceMethod_EVIDENCE_METHOD_SYNTHETIC || ev.GetSample().GetAttempted() != int64(e.GetQualification().GetFixturesTotal()) ||
		ev.GetRates()[0].GetSuccesses() != ev.GetRates()[0].GetDenominator() || !ev.GetExpiresAt().AsTime().After(ev.GetObservedAt().AsTime().Add(29*24*time.Hour)) ||
		ev.GetSubject().GetToolName() != "echo" || !strings.HasPrefix(ev.GetProvenance().GetRetrievalDigest(), "sha256:") {
		t.Fatalf("evidence %v", ev)
	}
	if code, _, _ := runKeyCLI(t, "enroll", "--url", url, "--no-apply"); code != exitUsage {
		t.Fatalf("missing --name: exit %d", code)
	}
}

// FuzzParseLabels: --labels is read as comma-separated k=v items with the
// spaces around items, keys and values ignored; anything else (an item
// without "=", an empty key, a key given twice) is refused naming the item.
// An accepted map holds exactly the items given, and written back as
// "k=v,..." parses to itself.
func FuzzParseLabels(f *testing.F) {
	for _, s := range []string{"region=eu-west, host=a", "novalue", "", ",", " , ", "a=", "=b", "a=b=c", "a=1,a=2", "region = eu-west",
		`host="h",region=eu-west,tenant-classes=default`, "a=b,,c=d", "a\t=\tb", "k=v,\n", "tenant-classes=a,b", "x,a=b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseLabels(s)
		want, why, last := map[string]string{}, "", ""
		for item := range strings.SplitSeq(s, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			k, v, ok := strings.Cut(item, "=")
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if !ok && last != "" { // another value of the label before
				want[last] += "," + item
				continue
			}
			last = k
			if _, dup := want[k]; why == "" && (!ok || k == "" || dup) {
				why = item
			}
			want[k] = v
		}
		if why != "" {
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", why)) {
				t.Fatalf("%q: %v, %v (want an error naming %q)", s, got, err, why)
			}
			return
		}
		if err != nil || !maps.Equal(got, want) {
			t.Fatalf("%q: %v, %v; want %v", s, got, err, want)
		}
		var items []string
		for _, k := range slices.Sorted(maps.Keys(got)) {
			items = append(items, k+"="+got[k])
		}
		if again, err := parseLabels(strings.Join(items, ",")); err != nil || !maps.Equal(again, got) {
			t.Fatalf("%q: %v written back as %q: %v, %v", s, got, strings.Join(items, ","), again, err)
		}
	})
}
