package agent

import (
	"bytes"
	"context"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/mcpready/mcpready/agent/internal/cptest"
	"github.com/mcpready/mcpready/agent/internal/mcptest"
	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/ingest"
	"github.com/mcpready/mcpready/controlplane/receiptstore"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/safebuf"
	"github.com/mcpready/mcpready/sign"
)

// The adversary is a careless upstream that repeats the call's argument,
// a secret, everywhere it can: in a JSON-RPC error message, in an isError
// result, in a log notification, in a progress notification and in a
// successful result, through both views. The AI agent may see its own
// secret come back; the secret must appear in no receipt, no spool file,
// no receipt-store file, no query or export answer, and no log line of the
// agent (at debug level).
func TestEchoedSecretStaysOutOfReceiptsStoresExportsAndLogs(t *testing.T) {
	const secret = "patient-record-ECHOED-ARGUMENT-7731" // no credential shape: caught by structure, not by a pattern
	env := cptest.Start(t)
	dir := t.TempDir()

	// The control plane's receipt path: TrustPolicy granting the agent
	// key, ingest into a real receipt store.
	agentKey, err := sign.GenerateKey(sign.AlgorithmECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := sign.MarshalPublicKey(agentKey.Public())
	kid, _ := sign.KeyID(agentKey.Public())
	tpBundle := env.Put(artifact.New(artifact.KindTrustPolicy, "default", &mcpreadyv1.TrustPolicy{Keys: []*mcpreadyv1.KeyGrant{
		{KeyId: kid, PublicKey: string(pub), Name: "host-leak", Kinds: []string{"ReceiptBatch"}, Scopes: []string{"host-leak/*"}}}}))
	trust, err := sign.NewTrust(tpBundle, env.RootPub, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	storeDir := filepath.Join(dir, "store")
	rs, err := receiptstore.Open(storeDir, receiptstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	svc, err := ingest.New(ingest.Options{Store: rs, Trust: func() *sign.Trust { return trust }})
	if err != nil {
		t.Fatal(err)
	}
	env.Register(func(gs *grpc.Server) { mcpreadyv1.RegisterReceiptsServiceServer(gs, svc) })
	env.Stop()
	env.Serve("127.0.0.1:0")

	up := mcptest.New(t, mcptest.Options{})
	mcptest.AddLeakTool(up.Server)
	mcptest.AddFailTool(up.Server)
	publish(t, env, up)
	logs := &safebuf.Buffer{}
	dataDir := filepath.Join(dir, "data")
	a, stop := start(t, Options{ControlPlane: env.Addr, Root: env.RootPub, NodeID: "host-leak", Listen: "127.0.0.1:0", DataDir: dataDir,
		Config: writeConfig(t, dir), AgentKey: agentKey, Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	defer stop()
	waitEntries(t, a, 4)

	var mu sync.Mutex
	var relayed []string // what the AI agent's client received in notifications
	c := mcp.NewClient(&mcp.Implementation{Name: "ai"}, &mcp.ClientOptions{
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			mu.Lock()
			relayed = append(relayed, "log:"+toString(r.Params.Data))
			mu.Unlock()
		},
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			relayed = append(relayed, "progress:"+r.Params.Message)
			mu.Unlock()
		},
	})
	ctx := context.Background()
	args := map[string]any{"text": secret}
	calls := 0
	for _, era := range []struct{ view, version string }{{"/mcp/servers/test", "2025-11-25"}, {"/mcp/servers/test", ""}, {"/mcp", ""}} {
		view := era.view
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + a.Addr() + view, MaxRetries: -1},
			&mcp.ClientSessionOptions{ProtocolVersion: era.version})
		if err != nil {
			t.Fatal(err)
		}
		if era.version != "" { // a session-era client asks for the upstream's logs
			if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
				t.Fatalf("%s: %v", view, err)
			}
		}
		name := func(tool string) string {
			if view == "/mcp" {
				return "test__" + tool
			}
			return tool
		}
		p := &mcp.CallToolParams{Name: name("leak"), Arguments: args}
		p.SetProgressToken("tok-" + view + era.version)
		res, err := cs.CallTool(ctx, p)
		if err != nil || res.IsError || !strings.Contains(text(res), secret) {
			t.Fatalf("%s leak: %v %+v", view, err, res)
		}
		if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name("fail"), Arguments: args}); err != nil || !res.IsError {
			t.Fatalf("%s fail: %v %+v", view, err, res)
		}
		up.SetFault(mcptest.FaultEchoError, "tools/call")
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: name("echo"), Arguments: args})
		up.SetFault(mcptest.FaultNone, "")
		if err == nil && !res.IsError {
			t.Fatalf("%s echo with an echoing error answered %+v", view, res)
		}
		calls += 3
		cs.Close()
	}
	mu.Lock()
	if !slices.ContainsFunc(relayed, func(r string) bool { return strings.HasPrefix(r, "log:") }) ||
		!slices.ContainsFunc(relayed, func(r string) bool { return strings.HasPrefix(r, "progress:") }) {
		t.Errorf("relayed %q: want the upstream's log and progress notifications, else the test proves nothing about them", relayed)
	}
	for _, r := range relayed {
		if !strings.Contains(r, secret) {
			t.Errorf("relayed notification %q does not carry the echo", r)
		}
	}
	mu.Unlock()

	// Wait until every receipt is stored by the control plane.
	rc := mcpreadyv1.NewReceiptsServiceClient(env.Dial())
	var stored *mcpreadyv1.QueryReceiptsResponse
	for deadline := time.Now().Add(20 * time.Second); ; {
		stored, err = rc.QueryReceipts(ctx, &mcpreadyv1.QueryReceiptsRequest{AgentId: "host-leak", Limit: 100})
		if err == nil && len(stored.GetReceipts()) >= calls {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d receipts stored (%v), want %d", len(stored.GetReceipts()), err, calls)
		}
		time.Sleep(100 * time.Millisecond)
	}
	leaks := func(what string, b []byte) {
		t.Helper()
		if bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte("ECHOED-ARGUMENT")) {
			t.Errorf("the echoed secret is in %s", what)
		}
	}
	b, _ := proto.Marshal(stored)
	leaks("the stored receipts (QueryReceipts)", b)
	ex, err := rc.ExportBatches(ctx, &mcpreadyv1.ExportBatchesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	exported := 0
	for {
		m, err := ex.Recv()
		if err != nil {
			break
		}
		exported++
		b, _ := proto.Marshal(m)
		leaks("an exported batch", b)
	}
	if exported == 0 {
		t.Fatal("nothing exported")
	}
	for _, root := range []string{dataDir, storeDir} {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				b, _ := os.ReadFile(p)
				leaks(p, b)
			}
			return nil
		})
	}
	stop()
	if !strings.Contains(logs.String(), `"level"`) {
		t.Fatal("the agent logged nothing: the log check would prove nothing")
	}
	leaks("the agent's log", []byte(logs.String()))
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

func toString(v any) string {
	s, _ := v.(string)
	return s
}
