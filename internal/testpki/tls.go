package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpready/mcpready/controlplane/authz"
	"github.com/mcpready/mcpready/nodelabel"
)

// TLSFiles are PEM files for a test mTLS setup under one directory.
type TLSFiles struct {
	CA                    string // CA certificate
	CAKey                 string // CA private key, to issue more client certificates
	ServerCert, ServerKey string // for 127.0.0.1 and localhost
	ClientCert, ClientKey string // client certificate signed by CA
}

// TLS writes a fresh CA, a server certificate for 127.0.0.1/localhost and
// a client certificate into dir.
func TLS(t testing.TB, dir string) TLSFiles {
	t.Helper()
	caKey := newTLSKey(t)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mcpready test CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	f := TLSFiles{CA: filepath.Join(dir, "ca.crt"), ServerCert: filepath.Join(dir, "server.crt"), ServerKey: filepath.Join(dir, "server.key"),
		ClientCert: filepath.Join(dir, "client.crt"), ClientKey: filepath.Join(dir, "client.key")}
	writePEM(t, f.CA, "CERTIFICATE", caDER)
	f.CAKey = filepath.Join(dir, "ca.key")
	caKD, err := x509.MarshalPKCS8PrivateKey(caKey)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, f.CAKey, "PRIVATE KEY", caKD)
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, certPath, keyPath string) {
		k := newTLSKey(t)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now().Add(-time.Hour),
			NotAfter: time.Now().Add(24 * time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature}
		if usage == x509.ExtKeyUsageServerAuth {
			tmpl.IPAddresses, tmpl.DNSNames = []net.IP{net.ParseIP("127.0.0.1")}, []string{"localhost"}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, k.Public(), caKey)
		if err != nil {
			t.Fatal(err)
		}
		kd, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		writePEM(t, certPath, "CERTIFICATE", der)
		writePEM(t, keyPath, "PRIVATE KEY", kd)
	}
	leaf(2, "controlplane", x509.ExtKeyUsageServerAuth, f.ServerCert, f.ServerKey)
	leaf(3, "agent", x509.ExtKeyUsageClientAuth, f.ClientCert, f.ClientKey)
	return f
}

func newTLSKey(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Client issues another client certificate, with common name cn, signed by
// f's CA, into the CA's directory; it returns the certificate and key files.
func (f TLSFiles) Client(t testing.TB, cn string) (cert, key string) {
	t.Helper()
	return f.client(t, cn, nil)
}

// ClientLabelled is Client for a certificate that also binds node labels:
// one URI SAN per value (nodelabel.CertURI).
func (f TLSFiles) ClientLabelled(t testing.TB, cn string, labels map[nodelabel.Key][]string) (cert, key string) {
	t.Helper()
	var uris []*url.URL
	for k, vs := range labels {
		for _, v := range vs {
			u, err := url.Parse(nodelabel.CertURI(k, v))
			if err != nil {
				t.Fatal(err)
			}
			uris = append(uris, u)
		}
	}
	return f.client(t, cn, uris)
}

func (f TLSFiles) client(t testing.TB, cn string, uris []*url.URL) (cert, key string) {
	pair, err := tls.LoadX509KeyPair(f.CA, f.CAKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	k := newTLSKey(t)
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(24 * time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature, URIs: uris}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, k.Public(), pair.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(f.CA)
	cert, key = filepath.Join(dir, cn+".crt"), filepath.Join(dir, cn+".key")
	writePEM(t, cert, "CERTIFICATE", der)
	writePEM(t, key, "PRIVATE KEY", kd)
	return cert, key
}

// Roles are role rules for the certificates TLS and Client issue: the
// default client certificate ("agent") holds every role; "admin-*" are
// admins, "reader-*" readers and "node-*" agents.
func Roles() []authz.Rule {
	return []authz.Rule{{Match: "agent", Role: authz.RoleAdmin}, {Match: "agent", Role: authz.RoleAgent}, {Match: "agent", Role: authz.RoleReader},
		{Match: "admin-*", Role: authz.RoleAdmin}, {Match: "reader-*", Role: authz.RoleReader}, {Match: "node-*", Role: authz.RoleAgent}}
}

// Pool is a certificate pool holding f's CA.
func (f TLSFiles) Pool(t testing.TB) *x509.CertPool {
	t.Helper()
	ca, err := os.ReadFile(f.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatal("testpki: no CA certificate in " + f.CA)
	}
	return pool
}

// ServerMTLS is the server side of f: its certificate, requiring client
// certificates from its CA.
func (f TLSFiles) ServerMTLS(t testing.TB) *tls.Config {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(f.ServerCert, f.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: f.Pool(t), ClientAuth: tls.RequireAndVerifyClientCert}
}

// ClientTLS is a client configuration trusting f's CA that presents the
// certificate and key in certFile and keyFile (none when certFile is "").
func (f TLSFiles) ClientTLS(t testing.TB, certFile, keyFile string) *tls.Config {
	t.Helper()
	cfg := &tls.Config{RootCAs: f.Pool(t)}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg
}
