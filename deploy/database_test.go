package deploy

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/mcpready/mcpready/controlplane/receiptdb"
	"github.com/mcpready/mcpready/internal/testpki"
)

// TestReceiptsDatabaseOption checks the database option of both
// deployments: the URL comes from a Secret (Kubernetes) or a mode-0600
// environment file (systemd) through MCPREADY_RECEIPTS_STORE, never the
// command line, and every shipped URL verifies the server (TLS required).
func TestReceiptsDatabaseOption(t *testing.T) {
	var kust struct {
		Resources []string `json:"resources"`
		Patches   []struct {
			Path string `json:"path"`
		} `json:"patches"`
	}
	read := func(p string, v any) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	read("kubernetes/receipts-database/kustomization.yaml", &kust)
	if len(kust.Resources) < 2 || kust.Resources[0] != ".." || len(kust.Patches) != 1 {
		t.Fatalf("overlay %+v", kust)
	}
	var patch struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Name string `json:"name"`
						Args []string
						Env  []struct {
							Name      string `json:"name"`
							ValueFrom struct {
								SecretKeyRef struct {
									Name string `json:"name"`
									Key  string `json:"key"`
								} `json:"secretKeyRef"`
							} `json:"valueFrom"`
						} `json:"env"`
					} `json:"containers"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	read("kubernetes/receipts-database/"+kust.Patches[0].Path, &patch)
	if patch.Kind != "StatefulSet" || patch.Metadata.Name != "mcpready-controlplane" {
		t.Fatalf("patch targets %s/%s", patch.Kind, patch.Metadata.Name)
	}
	c := patch.Spec.Template.Spec.Containers
	if len(c) != 1 || len(c[0].Env) != 1 || c[0].Env[0].Name != "MCPREADY_RECEIPTS_STORE" || c[0].Env[0].ValueFrom.SecretKeyRef.Name != "mcpready-receipts-database" {
		t.Fatalf("patch does not take MCPREADY_RECEIPTS_STORE from the Secret: %+v", c)
	}
	var secret struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		StringData map[string]string `json:"stringData"`
	}
	read("kubernetes/receipts-database/secret.yaml", &secret)
	env, err := os.ReadFile("systemd/receipts-database.env")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^MCPREADY_RECEIPTS_STORE=(.*)$`).FindSubmatch(env)
	if m == nil {
		t.Fatal("systemd/receipts-database.env sets no MCPREADY_RECEIPTS_STORE")
	}
	// The shipped URLs name the CA where the deployments mount it; parse
	// them with a real CA there.
	ca := testpki.TLS(t, t.TempDir()).CA
	for where, url := range map[string]string{"secret": secret.StringData[c[0].Env[0].ValueFrom.SecretKeyRef.Key], "systemd": string(m[1])} {
		if !strings.Contains(url, "sslmode=verify-full") || !strings.Contains(url, "sslrootcert=/etc/mcpready/database/ca.crt") {
			t.Errorf("%s: URL does not verify the database server with the mounted CA: %s", where, url)
		}
		url = strings.Replace(url, "/etc/mcpready/database/ca.crt", ca, 1)
		if _, err := receiptdb.ParseConfig(url); err != nil {
			t.Errorf("%s: %v", where, err)
		}
	}
	dropIn, err := os.ReadFile("systemd/mcpready-controlplane.service.d/receipts-database.conf")
	if err != nil || !strings.Contains(string(dropIn), "EnvironmentFile=/etc/mcpready/receipts-database.env") {
		t.Fatalf("drop-in does not read the environment file: %v", err)
	}
}
