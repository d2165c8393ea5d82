// Command harness runs a complete host agent in one process for the MCP
// conformance run: it generates a throw-away root key, enrolls the upstream
// (listing its tools and pinning their identities), approves every tool as
// QUALIFIED for the default principal, signs the TrustPolicy, the
// RegistryEntries and the Policy, verifies them through the agent's normal
// Discovery client path (subscribe.Apply), and serves the agent's front until
// interrupted. It prints "READY http://ADDR" once serving.
//
// It is test tooling: the key is never written anywhere but the temporary
// data directory, and nothing here is production configuration.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/mcpready/mcpready/agent"
	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/enroll"
	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/sign"
)

func main() {
	upstreamURL := flag.String("upstream", "", "upstream Streamable HTTP endpoint")
	name := flag.String("name", "everything", "server name to enroll it as")
	listen := flag.String("listen", "127.0.0.1:0", "agent listen address")
	data := flag.String("data", "", "data directory (default: a temporary directory)")
	flag.Parse()
	if err := run(*upstreamURL, *name, *listen, *data); err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		os.Exit(1)
	}
}

func run(upstreamURL, name, listen, data string) error {
	if upstreamURL == "" {
		return fmt.Errorf("-upstream is required")
	}
	if data == "" {
		d, err := os.MkdirTemp("", "mcpready-conformance-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		data = d
	}
	root, err := sign.GenerateKey(sign.AlgorithmEd25519)
	if err != nil {
		return err
	}
	cfg, err := config.Parse([]byte("defaultPrincipal:\n  name: conformance\n  principalClass: default\n"))
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	a, err := agent.New(agent.Options{Root: root.Public(), NodeID: "conformance", Listen: listen, DataDir: filepath.Join(data, "agent"),
		Config: cfg, Logger: logger})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	srv, err := enroll.List(lctx, config.Upstream{Name: name, URL: upstreamURL})
	if err != nil {
		return fmt.Errorf("enrolling %s: %w", upstreamURL, err)
	}
	objs, err := srv.Entries("conformance", time.Now())
	srv.Close()
	if err != nil {
		return err
	}
	apply := func(o *artifact.Object) error {
		bundle, _, err := sign.Sign(o, root)
		if err != nil {
			return err
		}
		return a.Sync().Apply(o.Kind, []*mcpreadyv1.Resource{{Name: o.Metadata.Name, Version: "1", Bundle: bundle}}, nil, false)
	}
	if err := apply(artifact.New(artifact.KindTrustPolicy, "default", &mcpreadyv1.TrustPolicy{})); err != nil {
		return err
	}
	for _, o := range objs {
		o.Spec.(*mcpreadyv1.RegistryEntry).State = mcpreadyv1.LifecycleState_LIFECYCLE_STATE_QUALIFIED
		if err := apply(o); err != nil {
			return err
		}
	}
	if err := apply(artifact.New(artifact.KindPolicy, "default", &mcpreadyv1.Policy{
		Inventory: []string{name + "/*"},
		Evidence:  &mcpreadyv1.EvidenceRules{OnUnknown: mcpreadyv1.UnknownEvidenceAction_UNKNOWN_EVIDENCE_ACTION_ALLOW},
		// The conformance client exercises every method of the server.
		Principals: []*mcpreadyv1.PrincipalRule{{PrincipalClass: "default", Allow: []string{"*"},
			Methods: []*mcpreadyv1.MethodRule{{Server: name, Allow: []string{"*"}, Resources: []string{"*"}, Prompts: []string{"*"}}}}},
	})); err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- a.Run(ctx) }()
	for a.Installed() != a.Sync().Snapshot().Generation {
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Printf("READY http://%s\n", a.Addr())
	return <-errc
}
