package replaytest_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/agent/subscribe"
	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane"
	"github.com/mcpready/mcpready/controlplane/authz"
	"github.com/mcpready/mcpready/controlplane/store"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/cprun"
	"github.com/mcpready/mcpready/internal/etcdtest"
	"github.com/mcpready/mcpready/internal/safebuf"
	"github.com/mcpready/mcpready/internal/testpki"
	"github.com/mcpready/mcpready/sign"
)

// node is the agent's node id; its client certificate names it, and
// testpki's Agent key is granted DriftReport for it.
const node = "host-1"

// roles: "admin-*" apply and delete, "reader-*" read, "host-*" are agents
// (node id: the certificate name).
var roles = []authz.Rule{{Match: "admin-*", Role: authz.RoleAdmin}, {Match: "reader-*", Role: authz.RoleReader}, {Match: "host-*", Role: authz.RoleAgent}}

// env is one control plane on its own etcd, and the clients of the suite.
type env struct {
	t     *testing.T
	pki   *testpki.PKI
	files testpki.TLSFiles
	etcdF testpki.TLSFiles // etcd's server, CA and client certificate files
	pool  *x509.CertPool
	srv   *controlplane.Server
	reg   *prometheus.Registry
	log   *safebuf.Buffer
	etcd  *clientv3.Client
	// hostile writes straight into the control plane's etcd, past the
	// write path: a compromised control plane or etcd.
	hostile *store.Store
	admin   mcpreadyv1.AdminServiceClient
	// head is the TrustPolicy bundle last accepted by Admin (what the
	// next one supersedes).
	head []byte
}

func start(t *testing.T) *env {
	t.Helper()
	return startWith(t, nil)
}

// startWith is start with the control plane's options changed by opts
// (given the env, whose test PKI is made).
func startWith(t *testing.T, opts func(*env, *controlplane.Options)) *env {
	t.Helper()
	e := &env{t: t, pki: testpki.New(t), files: testpki.TLS(t, t.TempDir()), reg: prometheus.NewRegistry(), log: &safebuf.Buffer{}}
	// etcd serves only TLS and requires client certificates; the hostile
	// writer holds one, as a compromised control plane does
	m, ef := etcdtest.EtcdTLS(t)
	e.etcdF = ef
	etcdTLS, err := controlplane.EtcdClientTLS(ef.CA, ef.ClientCert, ef.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientURL}, TLS: etcdTLS, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	e.etcd, e.hostile = cli, store.New(cli, store.Options{})
	e.pool = x509.NewCertPool()
	ca, err := os.ReadFile(e.files.CA)
	if err != nil {
		t.Fatal(err)
	}
	e.pool.AppendCertsFromPEM(ca)
	srvCert, err := tls.LoadX509KeyPair(e.files.ServerCert, e.files.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	o := controlplane.Options{Listen: "127.0.0.1:0", MetricsListen: "off", EtcdEndpoints: []string{m.ClientURL}, EtcdTLS: etcdTLS, Root: e.pki.Root.Public(),
		TLS:   &tls.Config{Certificates: []tls.Certificate{srvCert}, ClientCAs: e.pool, ClientAuth: tls.RequireAndVerifyClientCert},
		Roles: roles, Registry: e.reg, Debounce: 10 * time.Millisecond, Logger: slog.New(slog.NewJSONHandler(e.log, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if opts != nil {
		opts(e, &o)
	}
	e.srv = cprun.Start(t, o)
	e.admin = mcpreadyv1.NewAdminServiceClient(e.dial("admin-ops"))
	e.apply(e.pki.TrustPolicy)
	t.Cleanup(func() { e.noSecrets(e.log.String()) })
	return e
}

// dial connects with a fresh client certificate named cn.
func (e *env) dial(cn string) *grpc.ClientConn {
	e.t.Helper()
	certFile, keyFile := e.files.Client(e.t, cn)
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		e.t.Fatal(err)
	}
	c, err := grpc.NewClient(e.srv.Addr(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: e.pool, Certificates: []tls.Certificate{cert}})))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	return c
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

// apply applies b as the admin and fails the test when it is refused.
func (e *env) apply(b []byte) {
	e.t.Helper()
	if _, err := e.admin.Apply(ctx(e.t), &mcpreadyv1.ApplyRequest{Bundle: b}); err != nil {
		e.t.Fatalf("apply: %v", err)
	}
	if o, err := sign.Peek(b); err == nil && o.Kind == artifact.KindTrustPolicy {
		e.head = b
	}
}

// nameOf is the name the suite gives an artifact of kind k.
func nameOf(k artifact.Kind) string {
	if k == artifact.KindTrustPolicy {
		return "test/trust"
	}
	return "org/" + strings.ToLower(string(k))
}

// signerOf is the key that signs the suite's artifacts of kind k.
func (e *env) signerOf(k artifact.Kind) crypto.Signer {
	if k == artifact.KindTrustPolicy {
		return e.pki.Root
	}
	return e.pki.Org
}

// version signs an artifact of kind k (named nameOf(k)) at version; salt
// changes its content, a non-zero expires sets provenance.expiresAt. A
// TrustPolicy keeps testpki's grants and supersedes e.head.
func (e *env) version(k artifact.Kind, version, salt string, expires time.Time) []byte {
	e.t.Helper()
	return e.versionBy(k, version, salt, expires, e.signerOf(k))
}

func (e *env) versionBy(k artifact.Kind, version, salt string, expires time.Time, signer crypto.Signer) []byte {
	e.t.Helper()
	pv := &mcpreadyv1.Provenance{Issuer: "test" + salt, Version: version, IssuedAt: timestamppb.Now()}
	if !expires.IsZero() {
		pv.ExpiresAt = timestamppb.New(expires)
	}
	var spec proto.Message
	if k == artifact.KindEvidence { // it claims what the org key's grant binds; salt goes elsewhere
		pv.Issuer = testpki.OrgEvidence.Issuer
		spec = &mcpreadyv1.Evidence{Observer: &mcpreadyv1.Observer{Independence: testpki.OrgEvidence.Independence, Software: salt}}
	}
	if k == artifact.KindTrustPolicy {
		v, err := sign.Peek(e.pki.TrustPolicy)
		if err != nil {
			e.t.Fatal(err)
		}
		tp := proto.Clone(v.Spec).(*mcpreadyv1.TrustPolicy)
		tp.Supersedes = testpki.RefOf(e.t, e.head)
		spec = tp
	}
	return testpki.Sign(e.t, testpki.Versioned(k, nameOf(k), spec, pv), signer)
}

// publish applies versions 1..versions of kind k (not TrustPolicy)
// through Admin and returns them (vs[i] is version i+1).
func (e *env) publish(k artifact.Kind) [][]byte {
	e.t.Helper()
	var vs [][]byte
	for i := 1; i <= versions; i++ {
		b := e.version(k, strconv.Itoa(i), "", time.Time{})
		e.apply(b)
		vs = append(vs, b)
	}
	return vs
}

// history is the number of stored revisions of (k, name).
func (e *env) history(k artifact.Kind, name string) int {
	e.t.Helper()
	h, err := e.hostile.History(ctx(e.t), k, name)
	if err != nil {
		e.t.Fatal(err)
	}
	return len(h)
}

// etcdRevision is etcd's current revision once it has not moved for
// 100ms (the lifecycle records applied revisions asynchronously): any
// write raises it.
func (e *env) etcdRevision() int64 {
	e.t.Helper()
	last := e.rawRevision()
	for stable := time.Now(); time.Since(stable) < 100*time.Millisecond; time.Sleep(10 * time.Millisecond) {
		if r := e.rawRevision(); r != last {
			last, stable = r, time.Now()
		}
	}
	return last
}

func (e *env) rawRevision() int64 {
	e.t.Helper()
	r, err := e.etcd.Get(ctx(e.t), "/mcpready/v1/latest/", clientv3.WithCountOnly())
	if err != nil {
		e.t.Fatal(err)
	}
	return r.Header.Revision
}

// plant stores bundle as the latest revision of (k, name) straight in
// etcd, as a compromised control plane or etcd can: the store's own
// rollback check is passed with a made-up version, so what reaches the
// agents is theirs to refuse.
func (e *env) plant(k artifact.Kind, name string, bundle []byte, deleted bool) {
	e.t.Helper()
	held := ""
	if r, err := e.hostile.Get(ctx(e.t), k, name); err == nil {
		held = r.HighWater
	}
	rec := store.Record{Kind: k, Name: name, Bundle: bundle, Deleted: deleted}
	if !deleted {
		rec.Version = artifact.NextVersion(held)
	}
	if _, _, err := e.hostile.Put(ctx(e.t), rec); err != nil {
		e.t.Fatal(err)
	}
}

// counter is the sum of the control plane's counters name with labels
// (0 when absent).
func (e *env) counter(name string, labels map[string]string) float64 {
	e.t.Helper()
	return counter(e.t, e.reg, name, labels)
}

func counter(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			n := 0
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v == l.GetValue() {
					n++
				}
			}
			if n == len(labels) {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// noSecrets fails the test when a log holds private key material: any
// PEM or PKCS #8 P-256 private key, or the private scalar (base64 or hex)
// of a signing key of the test PKI or of a TLS key of the control plane or
// etcd.
func (e *env) noSecrets(logs ...string) {
	e.t.Helper()
	keys := []crypto.Signer{e.pki.Root, e.pki.Org, e.pki.Provider, e.pki.Observer, e.pki.Agent}
	for _, f := range []string{e.files.ServerKey, e.files.ClientKey, e.files.CAKey, e.etcdF.ServerKey, e.etcdF.ClientKey, e.etcdF.CAKey} {
		b, err := os.ReadFile(f)
		if err != nil {
			e.t.Fatal(err)
		}
		blk, _ := pem.Decode(b)
		k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
		if err != nil {
			e.t.Fatal(err)
		}
		keys = append(keys, k.(crypto.Signer))
	}
	var secrets []string
	for _, k := range keys {
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			e.t.Fatal(err)
		}
		d := k.(*ecdsa.PrivateKey).D.Bytes()
		// the PKCS #8 header every P-256 private key starts with, and this key's scalar
		secrets = append(secrets, base64.StdEncoding.EncodeToString(der)[:40], base64.StdEncoding.EncodeToString(d)[:24], base64.RawURLEncoding.EncodeToString(d)[:24], fmt.Sprintf("%x", d)[:32])
	}
	for _, l := range logs {
		if strings.Contains(l, "PRIVATE KEY") {
			e.t.Error("a log holds a PEM private key")
		}
		for i, s := range secrets {
			if strings.Contains(l, s) {
				e.t.Errorf("a log holds private key material (pattern %d of key %d)", i%4, i/4)
			}
		}
	}
}

// agent is one real subscribing agent with its last-known-good file.
type agent struct {
	e      *env
	c      *subscribe.Client
	lkg    string
	log    *safebuf.Buffer
	reg    *prometheus.Registry
	mode   subscribe.Mode
	cancel context.CancelFunc
	done   chan struct{}
}

// startAgent starts an agent on the incremental Discovery stream over
// mTLS (as certificate "host-1"), after loading lkg (in dir).
func (e *env) startAgent(dir string) *agent {
	e.t.Helper()
	return e.startAgentMode(dir, subscribe.ModeDelta)
}

// startAgentMode is startAgent on the Discovery variant mode.
func (e *env) startAgentMode(dir string, mode subscribe.Mode) *agent {
	e.t.Helper()
	a := &agent{e: e, lkg: filepath.Join(dir, "lkg.json"), log: &safebuf.Buffer{}, reg: prometheus.NewRegistry(), mode: mode, done: make(chan struct{})}
	c, err := subscribe.New(subscribe.Options{Conn: e.dial(node), Root: e.pki.Root.Public(), Node: &mcpreadyv1.Node{Id: node}, LKGPath: a.lkg,
		Mode: mode, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, Logger: slog.New(slog.NewJSONHandler(a.log, nil)), Registerer: a.reg})
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := c.Load(); err != nil {
		e.t.Fatalf("load: %v", err)
	}
	a.c = c
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	go func() { _ = c.Run(ctx); close(a.done) }()
	e.t.Cleanup(a.stop)
	e.t.Cleanup(func() { e.noSecrets(a.log.String()) })
	return a
}

// stop ends the agent (a restart is stop, then restart).
func (a *agent) stop() {
	a.cancel()
	<-a.done
}

// restart stops the agent and starts another on its directory and mode.
func (a *agent) restart() *agent {
	a.e.t.Helper()
	a.stop()
	return a.e.startAgentMode(filepath.Dir(a.lkg), a.mode)
}

// held is the signed version the agent holds for (k, name), "" for an
// unversioned one and "<none>" when it holds nothing; its bundle too.
func (a *agent) held(k artifact.Kind, name string) (string, []byte) {
	s := a.c.Snapshot()
	if k == artifact.KindTrustPolicy {
		if s.Trust == nil {
			return "<none>", nil
		}
		r := s.Get(k, s.Trust.Ref().Name)
		return s.Trust.Policy().Object.Version(), r.Bundle
	}
	r := s.Get(k, name)
	if r == nil {
		return "<none>", nil
	}
	return r.Verified.Object.Version(), r.Bundle
}

// waitHeld waits until the agent holds exactly bundle for (k, name).
func (a *agent) waitHeld(k artifact.Kind, name string, bundle []byte) {
	a.e.t.Helper()
	a.wait(fmt.Sprintf("%s %q installed", k, name), func() bool { _, b := a.held(k, name); return string(b) == string(bundle) })
}

func (a *agent) wait(what string, cond func() bool) {
	a.e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			a.e.t.Fatalf("timed out waiting for %s; agent log:\n%s", what, a.log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// counted is the agent's own count of NACKs of kind k with reason.
func (a *agent) counted(k artifact.Kind, reason string) float64 {
	return counter(a.e.t, a.reg, "mcpready_agent_discovery_nacks_total", map[string]string{"type_url": k.TypeURL(), "reason": reason})
}

// nacks counts the agent's NACK log lines whose error contains every one
// of words.
func (a *agent) nacks(words ...string) int {
	n := 0
	for line := range strings.SplitSeq(a.log.String(), "\n") {
		var l struct {
			Msg string `json:"msg"`
			Err string `json:"err"`
		}
		if !strings.Contains(line, `"sync: NACK"`) || json.Unmarshal([]byte(line), &l) != nil || l.Msg != "sync: NACK" {
			continue
		}
		ok := true
		for _, w := range words {
			ok = ok && strings.Contains(l.Err, w)
		}
		if ok {
			n++
		}
	}
	return n
}

// refuses runs attack and waits for one more NACK of kind k naming
// words, and for the control plane to have received it.
func (a *agent) refuses(k artifact.Kind, what string, attack func(), words ...string) {
	a.e.t.Helper()
	before, counted := a.nacks(words...), a.e.acks(k, "nack")
	attack()
	a.wait(what+": NACK "+strings.Join(words, " "), func() bool { return a.nacks(words...) > before && a.e.acks(k, "nack") > counted })
}

// lkgHolds reports whether the agent's last-known-good file holds bundle.
func (a *agent) lkgHolds(bundle []byte) bool {
	data, err := os.ReadFile(a.lkg)
	if err != nil {
		return false
	}
	var f struct {
		Resources []struct {
			Bundle []byte `json:"bundle"`
		} `json:"resources"`
	}
	if json.Unmarshal(data, &f) != nil {
		return false
	}
	for _, r := range f.Resources {
		if string(r.Bundle) == string(bundle) {
			return true
		}
	}
	return false
}

// acks is how many answers of result ("ack", "nack") the control plane
// received from agents for kind k.
func (e *env) acks(k artifact.Kind, result string) float64 {
	return e.counter("mcpready_discovery_acks_total", map[string]string{"type_url": k.TypeURL(), "result": result})
}

// answered runs attack and waits until the control plane received one
// more answer (ACK or NACK) for kind k: the agent has processed it.
func (a *agent) answered(k artifact.Kind, what string, attack func()) {
	a.e.t.Helper()
	before := a.e.acks(k, "ack") + a.e.acks(k, "nack")
	attack()
	a.wait(what+": answered", func() bool { return a.e.acks(k, "ack")+a.e.acks(k, "nack") > before })
}

// logged counts the control plane's log lines with message msg whose
// attributes include attrs.
func (e *env) logged(msg string, attrs map[string]string) int {
	n := 0
	for line := range strings.SplitSeq(e.log.String(), "\n") {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) != nil || l["msg"] != msg {
			continue
		}
		ok := true
		for k, v := range attrs {
			ok = ok && fmt.Sprint(l[k]) == v
		}
		if ok {
			n++
		}
	}
	return n
}
