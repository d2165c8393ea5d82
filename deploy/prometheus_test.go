package deploy

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane"
	"github.com/mcpready/mcpready/controlplane/authz"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/testpki"
)

// shippedRoles are the --role rules of the shipped control plane: the
// Kubernetes StatefulSet's and the systemd unit's, which must agree.
func shippedRoles(t *testing.T) []authz.Rule {
	t.Helper()
	o, ok := find(manifests(t), "StatefulSet", "mcpready-controlplane")
	if !ok {
		t.Fatal("no control plane StatefulSet")
	}
	var k8s []string
	for _, c := range spec(t, o).Template.Spec.Containers {
		for _, a := range c.Args {
			if r, ok := strings.CutPrefix(a, "--role="); ok {
				k8s = append(k8s, r)
			}
		}
	}
	exec := strings.Join(parseUnit(t, "systemd/mcpready-controlplane.service")["Service"]["ExecStart"], " ")
	var rules []authz.Rule
	for _, r := range k8s {
		if !strings.Contains(exec, "--role="+r) {
			t.Errorf("the systemd unit lacks --role=%s", r)
		}
		rule, err := authz.ParseRule(r)
		if err != nil {
			t.Fatal(err)
		}
		rules = append(rules, rule)
	}
	return rules
}

// TestPrometheusScrapesOverMutualTLS: the shipped Prometheus scrape
// configuration presents a client certificate over https, the identity
// the shipped Secret names holds the reader role under the shipped role
// rules, the NetworkPolicy admits scraper pods to the metrics port, and a
// control plane run with those rules on a non-loopback metrics listener
// serves /metrics to that certificate (and refuses plaintext and an
// agent's certificate).
func TestPrometheusScrapesOverMutualTLS(t *testing.T) {
	data, err := os.ReadFile("prometheus/scrape-mcpready.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ScrapeConfigs []struct {
			JobName   string `json:"job_name"`
			Scheme    string `json:"scheme"`
			TLSConfig struct {
				CAFile     string `json:"ca_file"`
				CertFile   string `json:"cert_file"`
				KeyFile    string `json:"key_file"`
				ServerName string `json:"server_name"`
			} `json:"tls_config"`
		} `json:"scrape_configs"`
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.ScrapeConfigs) != 1 {
		t.Fatalf("scrape configs: %+v", cfg)
	}
	sc := cfg.ScrapeConfigs[0]
	if sc.Scheme != "https" || sc.TLSConfig.CertFile == "" || sc.TLSConfig.KeyFile == "" || sc.TLSConfig.CAFile == "" {
		t.Errorf("the scrape does not present a client certificate over https: %+v", sc)
	}
	np, ok := find(manifests(t), "NetworkPolicy", "mcpready-controlplane")
	if !ok || !strings.Contains(string(np.Spec), `"mcpready.dev/metrics-scraper":"true"`) || !strings.Contains(string(np.Spec), "7444") {
		t.Errorf("the control plane NetworkPolicy does not admit scrapers to 7444: %s", np.Spec)
	}
	if _, ok := find(manifests(t), "Secret", "mcpready-metrics-reader-tls"); !ok {
		t.Error("no Secret for Prometheus's reader certificate")
	}

	p := testpki.New(t)
	f := testpki.TLS(t, t.TempDir())
	s, err := controlplane.New(controlplane.Options{Listen: "127.0.0.1:0", MetricsListen: "0.0.0.0:0", DataDir: t.TempDir(), Root: p.Root.Public(), Roles: shippedRoles(t),
		TLS: f.ServerMTLS(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	select {
	case <-s.Ready():
	case err := <-done:
		t.Fatal(err)
	case <-time.After(30 * time.Second):
		t.Fatal("control plane not ready")
	}
	_, port, _ := net.SplitHostPort(s.MetricsAddr())
	get := func(scheme, cn string) int {
		var certFile, keyFile string
		if cn != "" {
			certFile, keyFile = f.Client(t, cn)
		}
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: f.ClientTLS(t, certFile, keyFile)}, Timeout: 10 * time.Second}
		resp, err := hc.Get(scheme + "://" + net.JoinHostPort("127.0.0.1", port) + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		scheme, cn string
		want       int
	}{
		{"https", "mcpready-metrics-reader", http.StatusOK},
		{"http", "", http.StatusUnauthorized},
		{"https", "mcpready-agent-node-1", http.StatusForbidden},
	} {
		if got := get(tc.scheme, tc.cn); got != tc.want {
			t.Errorf("%s as %q: %d, want %d", tc.scheme, tc.cn, got, tc.want)
		}
	}
}

// TestExampleAgentGrant: the example TrustPolicy grants the agent key
// every kind an agent signs (receipt batches and drift reports), for its
// node's names.
func TestExampleAgentGrant(t *testing.T) {
	data, err := os.ReadFile("examples/artifacts/trust-policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	o, err := artifact.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, kg := range o.Spec.(*mcpreadyv1.TrustPolicy).GetKeys() {
		if kg.GetName() != "agent-node-1" {
			continue
		}
		got := strings.Join(kg.GetKinds(), ",")
		if got != "ReceiptBatch,DriftReport" || len(kg.GetScopes()) != 1 || !strings.HasSuffix(kg.GetScopes()[0], "/*") {
			t.Fatalf("agent grant: kinds %s, scopes %v", got, kg.GetScopes())
		}
		return
	}
	t.Fatal("no agent grant")
}

// TestExampleClaimsBound: every key of the example TrustPolicy that may
// sign Evidence has its issuer and independence bound (sign.NewTrust
// refuses it otherwise: artifact.CheckEvidenceGrant), the example Evidence claims exactly what a grant
// binds, and every agent key is granted for one node id of its own, so
// one host's key cannot sign as another. Before, the observer grant bound
// nothing and the example Evidence claimed a pair no grant allowed.
func TestExampleClaimsBound(t *testing.T) {
	files, err := filepath.Glob("examples/artifacts/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example artifacts: %v", err)
	}
	var tp *mcpreadyv1.TrustPolicy
	var evs []*mcpreadyv1.Evidence
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		o, err := artifact.Parse(data)
		if err != nil {
			t.Fatal(err)
		}
		switch s := o.Spec.(type) {
		case *mcpreadyv1.TrustPolicy:
			tp = s
		case *mcpreadyv1.Evidence:
			evs = append(evs, s)
		}
	}
	type claim struct{ issuer, independence string }
	bound := map[claim]bool{}
	nodes := map[string]string{}
	for _, kg := range tp.GetKeys() {
		if err := artifact.CheckEvidenceGrant(kg); err != nil {
			t.Error(err)
		}
		if slices.Contains(kg.GetKinds(), string(artifact.KindEvidence)) {
			bound[claim{kg.GetEvidenceIssuer(), kg.GetIndependence()}] = true
		}
		if !slices.Contains(kg.GetKinds(), string(artifact.KindReceiptBatch)) {
			continue
		}
		if len(kg.GetScopes()) != 1 {
			t.Errorf("agent grant %q: scopes %v, want one node id", kg.GetName(), kg.GetScopes())
			continue
		}
		node, ok := strings.CutSuffix(kg.GetScopes()[0], "/*")
		if !ok || node == "" || strings.ContainsAny(node, "*?[/") {
			t.Errorf("agent grant %q: scope %q is not one node id", kg.GetName(), kg.GetScopes()[0])
		}
		if other, dup := nodes[node]; dup {
			t.Errorf("agent grants %q and %q both sign as node %q", other, kg.GetName(), node)
		}
		nodes[node] = kg.GetName()
	}
	if len(nodes) < 2 {
		t.Errorf("agent grants for nodes %v; show one grant per host", nodes)
	}
	for _, ev := range evs {
		if c := (claim{ev.GetProvenance().GetIssuer(), ev.GetObserver().GetIndependence()}); !bound[c] {
			t.Errorf("example Evidence claims %v, which no grant binds (%v)", c, bound)
		}
	}
}
