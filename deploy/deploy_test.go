package deploy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/artifact"
)

// object is the part of a Kubernetes object the checks read.
type object struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec json.RawMessage `json:"spec"`
	// Kustomization.
	Resources []string `json:"resources"`
}

type container struct {
	Name           string          `json:"name"`
	Image          string          `json:"image"`
	Args           []string        `json:"args"`
	ReadinessProbe json.RawMessage `json:"readinessProbe"`
	LivenessProbe  json.RawMessage `json:"livenessProbe"`
}

type volume struct {
	Name   string `json:"name"`
	Secret *struct {
		SecretName string `json:"secretName"`
		Optional   bool   `json:"optional"`
		Items      []struct {
			Path string `json:"path"`
		} `json:"items"`
	} `json:"secret"`
	ConfigMap *struct {
		Name string `json:"name"`
	} `json:"configMap"`
}

type podSpec struct {
	HostNetwork bool        `json:"hostNetwork"`
	Containers  []container `json:"containers"`
	Volumes     []volume    `json:"volumes"`
}

type workloadSpec struct {
	Replicas    *int   `json:"replicas"`
	ServiceName string `json:"serviceName"`
	Selector    struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	Template struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec podSpec `json:"spec"`
	} `json:"template"`
	// Service.
	ClusterIP string `json:"clusterIP"`
	// PodDisruptionBudget.
	MinAvailable any `json:"minAvailable"`
	// StatefulSet.
	VolumeClaimTemplates []struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	} `json:"volumeClaimTemplates"`
}

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

// manifests parses every YAML document under kubernetes/.
func manifests(t *testing.T) []object {
	t.Helper()
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	var out []object
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range docSep.Split(string(data), -1) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			// Strict YAML (duplicate keys are errors); the struct models only
			// the fields the checks read.
			j, err := yaml.YAMLToJSONStrict([]byte(doc))
			if err != nil {
				t.Fatalf("%s document %d: %v", f, i, err)
			}
			var o object
			if err := json.Unmarshal(j, &o); err != nil {
				t.Fatalf("%s document %d: %v", f, i, err)
			}
			if o.APIVersion == "" || o.Kind == "" || o.Metadata.Name == "" {
				t.Errorf("%s document %d: apiVersion %q, kind %q, metadata.name %q: all are required", f, i, o.APIVersion, o.Kind, o.Metadata.Name)
			}
			out = append(out, o)
		}
	}
	return out
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func spec(t *testing.T, o object) workloadSpec {
	t.Helper()
	var s workloadSpec
	if len(o.Spec) > 0 {
		if err := json.Unmarshal(o.Spec, &s); err != nil {
			t.Fatalf("%s %s: spec: %v", o.Kind, o.Metadata.Name, err)
		}
	}
	return s
}

func find(objs []object, kind, name string) (object, bool) {
	for _, o := range objs {
		if o.Kind == kind && o.Metadata.Name == name {
			return o, true
		}
	}
	return object{}, false
}

func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func TestManifestsParse(t *testing.T) {
	objs := manifests(t)
	for _, o := range objs {
		if o.Kind != "Namespace" && o.Kind != "Kustomization" && o.Metadata.Namespace != "mcpready" {
			t.Errorf("%s %s: namespace %q, want mcpready", o.Kind, o.Metadata.Name, o.Metadata.Namespace)
		}
	}
	k, ok := find(objs, "Kustomization", "mcpready")
	if !ok {
		t.Fatal("no kustomization.yaml")
	}
	for _, r := range k.Resources {
		if _, err := os.Stat(filepath.Join("kubernetes", r)); err != nil {
			t.Errorf("kustomization resource %s: %v", r, err)
		}
	}
}

func TestWorkloads(t *testing.T) {
	objs := manifests(t)
	tests := []struct {
		kind, name  string
		minReplicas int
		hostNetwork bool
		pdb         bool
	}{
		{"StatefulSet", "mcpready-controlplane", 2, false, true},
		{"StatefulSet", "etcd", 3, false, true},
		{"DaemonSet", "mcpready-agent", 0, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.kind+"/"+tc.name, func(t *testing.T) {
			o, ok := find(objs, tc.kind, tc.name)
			if !ok {
				t.Fatalf("missing %s %s", tc.kind, tc.name)
			}
			s := spec(t, o)
			if tc.minReplicas > 0 && (s.Replicas == nil || *s.Replicas < tc.minReplicas) {
				t.Errorf("replicas %v, want at least %d", s.Replicas, tc.minReplicas)
			}
			if !selects(s.Selector.MatchLabels, s.Template.Metadata.Labels) {
				t.Errorf("selector %v does not select the pod labels %v", s.Selector.MatchLabels, s.Template.Metadata.Labels)
			}
			if s.Template.Spec.HostNetwork != tc.hostNetwork {
				t.Errorf("hostNetwork %v, want %v", s.Template.Spec.HostNetwork, tc.hostNetwork)
			}
			for _, c := range s.Template.Spec.Containers {
				if len(c.ReadinessProbe) == 0 || len(c.LivenessProbe) == 0 {
					t.Errorf("container %s lacks a readiness or liveness probe", c.Name)
				}
				if c.Image == "" {
					t.Errorf("container %s has no image", c.Name)
				}
			}
			if tc.pdb {
				found := false
				for _, p := range objs {
					if p.Kind == "PodDisruptionBudget" && selects(spec(t, p).Selector.MatchLabels, s.Template.Metadata.Labels) {
						found = spec(t, p).MinAvailable != nil
					}
				}
				if !found {
					t.Errorf("no PodDisruptionBudget with minAvailable selects %s", tc.name)
				}
			}
			// Every Secret and ConfigMap the pods mount is defined here
			// (or optional).
			for _, v := range s.Template.Spec.Volumes {
				if v.Secret != nil && !v.Secret.Optional {
					if _, ok := find(objs, "Secret", v.Secret.SecretName); !ok {
						t.Errorf("volume %s: Secret %s is not defined", v.Name, v.Secret.SecretName)
					}
				}
				if v.ConfigMap != nil {
					if _, ok := find(objs, "ConfigMap", v.ConfigMap.Name); !ok {
						t.Errorf("volume %s: ConfigMap %s is not defined", v.Name, v.ConfigMap.Name)
					}
				}
			}
		})
	}
}

func TestAgentIsHostLocal(t *testing.T) {
	o, ok := find(manifests(t), "DaemonSet", "mcpready-agent")
	if !ok {
		t.Fatal("no agent DaemonSet")
	}
	args := strings.Join(spec(t, o).Template.Spec.Containers[0].Args, " ")
	if !strings.Contains(args, "--listen=127.0.0.1:") {
		t.Errorf("agent does not listen on loopback: %s", args)
	}
}

// The control plane keeps receipt batches in --data: each replica has its
// own persistent volume there, under a headless governing Service.
func TestControlPlaneReceiptVolumes(t *testing.T) {
	objs := manifests(t)
	sts, ok := find(objs, "StatefulSet", "mcpready-controlplane")
	if !ok {
		t.Fatal("no control plane StatefulSet")
	}
	s := spec(t, sts)
	if len(s.VolumeClaimTemplates) != 1 || s.VolumeClaimTemplates[0].Metadata.Name != "data" {
		t.Fatalf("volumeClaimTemplates %+v, want one named data", s.VolumeClaimTemplates)
	}
	for _, v := range s.Template.Spec.Volumes {
		if v.Name == "data" {
			t.Error("a pod volume named data shadows the persistent claim")
		}
	}
	if !strings.Contains(string(sts.Spec), `"--data=/var/lib/mcpready"`) || !strings.Contains(string(sts.Spec), `"mountPath":"/var/lib/mcpready"`) {
		t.Error("--data is not the mounted claim")
	}
	svc, ok := find(objs, "Service", s.ServiceName)
	if !ok || spec(t, svc).ClusterIP != "None" {
		t.Errorf("serviceName %q is not a headless Service", s.ServiceName)
	}
}

func TestEtcdHeadlessService(t *testing.T) {
	objs := manifests(t)
	sts, ok := find(objs, "StatefulSet", "etcd")
	if !ok {
		t.Fatal("no etcd StatefulSet")
	}
	svc, ok := find(objs, "Service", spec(t, sts).ServiceName)
	if !ok {
		t.Fatalf("etcd serviceName %q names no Service", spec(t, sts).ServiceName)
	}
	if spec(t, svc).ClusterIP != "None" {
		t.Errorf("etcd governing Service is not headless (clusterIP %q)", spec(t, svc).ClusterIP)
	}
}

func TestExampleArtifactsParse(t *testing.T) {
	files, err := filepath.Glob("examples/artifacts/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example artifacts: %v", err)
	}
	kinds := map[artifact.Kind]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		o, err := artifact.Parse(data)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		kinds[o.Kind] = true
	}
	for _, k := range []artifact.Kind{artifact.KindTrustPolicy, artifact.KindDeclaration, artifact.KindRegistryEntry, artifact.KindPolicy, artifact.KindEvidence} {
		if !kinds[k] {
			t.Errorf("no example of kind %s", k)
		}
	}
}

func TestExampleAgentConfig(t *testing.T) {
	check := func(name string, data []byte) {
		t.Helper()
		j, err := yaml.YAMLToJSONStrict(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		dec := json.NewDecoder(bytes.NewReader(j))
		dec.DisallowUnknownFields()
		var f config.File
		if err := dec.Decode(&f); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// Every local process without a token would act as it.
		if f.DefaultPrincipal != nil {
			t.Errorf("%s: a shipped configuration sets a default principal", name)
		}
	}
	data, err := os.ReadFile("examples/agent-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	check("examples/agent-config.yaml", data)
	// The copy embedded in the DaemonSet's ConfigMap.
	cm, ok := find(manifests(t), "ConfigMap", "mcpready-agent")
	if !ok {
		t.Fatal("no agent ConfigMap")
	}
	raw, _ := os.ReadFile("kubernetes/agent.yaml")
	var doc struct {
		Data map[string]string `json:"data"`
	}
	for _, d := range docSep.Split(string(raw), -1) {
		if strings.Contains(d, "kind: ConfigMap") {
			if err := yaml.Unmarshal([]byte(d), &doc); err != nil {
				t.Fatal(err)
			}
		}
	}
	if doc.Data["agent.yaml"] == "" {
		t.Fatalf("ConfigMap %s has no agent.yaml", cm.Metadata.Name)
	}
	check("ConfigMap mcpready-agent", []byte(doc.Data["agent.yaml"]))
}

// unit is a parsed systemd unit: section -> key -> values.
type unit map[string]map[string][]string

func parseUnit(t *testing.T, path string) unit {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unit{}
	section := ""
	sc := bufio.NewScanner(f)
	var cont string
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if cont != "" {
			line = cont + " " + line
			cont = ""
		}
		if strings.HasSuffix(line, `\`) {
			cont = strings.TrimSuffix(line, `\`)
			continue
		}
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: not a key=value line in a section: %q", path, n, line)
			}
			u[section][strings.TrimSpace(k)] = append(u[section][strings.TrimSpace(k)], strings.TrimSpace(v))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestSystemdUnits(t *testing.T) {
	for _, tc := range []struct{ file, sub string }{
		{"systemd/mcpready-controlplane.service", "controlplane"},
		{"systemd/mcpready-agent.service", "agent"},
	} {
		u := parseUnit(t, tc.file)
		for _, s := range []string{"Unit", "Service", "Install"} {
			if u[s] == nil {
				t.Errorf("%s: no [%s] section", tc.file, s)
			}
		}
		exec := u["Service"]["ExecStart"]
		if len(exec) != 1 || !strings.HasPrefix(exec[0], "/usr/local/bin/mcpready "+tc.sub+" ") {
			t.Errorf("%s: ExecStart %q does not run mcpready %s", tc.file, exec, tc.sub)
		}
		if env := u["Service"]["EnvironmentFile"]; len(env) == 1 {
			local := filepath.Join("systemd", filepath.Base(env[0]))
			example, err := os.ReadFile(local)
			if err != nil {
				t.Errorf("%s: example %s for EnvironmentFile: %v", tc.file, local, err)
			}
			// Every variable ExecStart reads is set (maybe empty) in the
			// example, but those systemd sets itself.
			for _, m := range regexp.MustCompile(`\$\{(\w+)\}`).FindAllStringSubmatch(strings.Join(exec, " "), -1) {
				if v := m[1]; v != "STATE_DIRECTORY" && !regexp.MustCompile(`(?m)^`+v+`=`).Match(example) {
					t.Errorf("%s: ExecStart reads ${%s}, which %s does not set", tc.file, v, local)
				}
			}
		}
	}
}

func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for _, want := range []string{"go build", "./cmd/mcpready", "ENTRYPOINT [\"/usr/local/bin/mcpready\"]", "USER 65532"} {
		if !strings.Contains(text, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
	// The image the manifests run runs as the user their securityContext names.
	for _, o := range manifests(t) {
		if strings.HasPrefix(o.Metadata.Name, "mcpready-") && (o.Kind == "StatefulSet" || o.Kind == "Deployment" || o.Kind == "DaemonSet") {
			if !strings.Contains(string(o.Spec), "65532") {
				t.Errorf("%s %s does not run as 65532", o.Kind, o.Metadata.Name)
			}
		}
	}
}

// TestTLSToEtcdAndNetworkPolicy: the shipped manifests run etcd with TLS
// and client-certificate auth for clients and peers, the control plane
// reaches it over https with a client certificate, agents reach the
// control plane on its mTLS port, and NetworkPolicies admit only the
// control plane (and the other members) to etcd.
func TestTLSToEtcdAndNetworkPolicy(t *testing.T) {
	objs := manifests(t)
	argsOf := func(kind, name string) string {
		o, ok := find(objs, kind, name)
		if !ok {
			t.Fatalf("no %s %s", kind, name)
		}
		var b strings.Builder
		for _, c := range spec(t, o).Template.Spec.Containers {
			b.WriteString(strings.Join(c.Args, " "))
		}
		return b.String()
	}
	etcd := argsOf("StatefulSet", "etcd")
	for _, want := range []string{"--listen-client-urls=https://", "--client-cert-auth=true", "--trusted-ca-file=", "--peer-client-cert-auth=true", "--listen-peer-urls=https://"} {
		if !strings.Contains(etcd, want) {
			t.Errorf("etcd args lack %s", want)
		}
	}
	if strings.Contains(etcd, "=http://0.0.0.0:2379") || strings.Contains(etcd, "=http://0.0.0.0:2380") {
		t.Error("etcd still listens in plaintext for clients or peers")
	}
	cp := argsOf("StatefulSet", "mcpready-controlplane")
	for _, want := range []string{"--etcd-endpoints=https://", "--etcd-ca=", "--etcd-cert=", "--etcd-key=", "--tls-ca="} {
		if !strings.Contains(cp, want) {
			t.Errorf("control plane args lack %s", want)
		}
	}
	if agent := argsOf("DaemonSet", "mcpready-agent"); !strings.Contains(agent, "--tls-") {
		t.Errorf("the agent does not use TLS to the control plane: %s", agent)
	}
	np, ok := find(objs, "NetworkPolicy", "etcd")
	if !ok {
		t.Fatal("no NetworkPolicy for etcd")
	}
	raw := string(np.Spec)
	if !strings.Contains(raw, `"app.kubernetes.io/name":"mcpready-controlplane"`) || !strings.Contains(raw, "2379") || strings.Contains(raw, "namespaceSelector") {
		t.Errorf("the etcd NetworkPolicy does not admit only the control plane:\n%s", raw)
	}
	if strings.Contains(raw, "2381") {
		t.Errorf("the etcd NetworkPolicy admits pods to etcd's plaintext metrics port 2381:\n%s", raw)
	}
	if _, ok := find(objs, "NetworkPolicy", "mcpready-controlplane"); !ok {
		t.Error("no NetworkPolicy for the control plane")
	}
	env, err := os.ReadFile("systemd/controlplane.env")
	if err != nil {
		t.Fatal(err)
	}
	unit := parseUnit(t, "systemd/mcpready-controlplane.service")["Service"]["ExecStart"][0]
	for _, v := range []string{"MCPREADY_ETCD_CA", "MCPREADY_ETCD_CERT", "MCPREADY_ETCD_KEY"} {
		if !strings.Contains(unit, "${"+v+"}") || !strings.Contains(string(env), v+"=") {
			t.Errorf("systemd: %s not passed to the control plane or not in controlplane.env", v)
		}
	}
}

// TestShippedAgentsKeyTheirDigests: both shipped agents pass
// --receipt-digest-key, from a file the DaemonSet mounts from a Secret,
// so their receipts' argument and result digests are HMACs, not plain
// SHA-256 a low-entropy argument falls out of by guessing.
func TestShippedAgentsKeyTheirDigests(t *testing.T) {
	o, ok := find(manifests(t), "DaemonSet", "mcpready-agent")
	if !ok {
		t.Fatal("no agent DaemonSet")
	}
	ps := spec(t, o).Template.Spec
	const k8sKey = "--receipt-digest-key=/etc/mcpready/agent-key/receipt-digest.key"
	if args := strings.Join(ps.Containers[0].Args, " "); !strings.Contains(args, k8sKey) {
		t.Errorf("agent DaemonSet does not pass %s: %s", k8sKey, args)
	}
	var items []string
	for _, v := range ps.Volumes {
		if v.Name == "agent-key" && v.Secret != nil {
			for _, it := range v.Secret.Items {
				items = append(items, it.Path)
			}
		}
	}
	if !slices.Contains(items, "receipt-digest.key") {
		t.Errorf("the agent-key volume projects %q, not receipt-digest.key", items)
	}
	exec := parseUnit(t, "systemd/mcpready-agent.service")["Service"]["ExecStart"]
	if len(exec) != 1 || !strings.Contains(exec[0], "--receipt-digest-key=/etc/mcpready/keys/receipt-digest.key") {
		t.Errorf("systemd agent does not pass --receipt-digest-key: %q", exec)
	}
}
