package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// defaultServer is the control plane's local default address.
const defaultServer = "127.0.0.1:7443"

// tlsOptions are the client TLS flags of every command that dials the
// control plane: --tls-ca, --tls-cert, --tls-key and --tls-server-name.
type tlsOptions struct {
	ca, cert, key, serverName string
}

// addFlags adds the TLS flags to cmd; their defaults come from
// $MCPREADY_CLIENT_CA, $MCPREADY_CLIENT_CERT and $MCPREADY_CLIENT_KEY.
func (o *tlsOptions) addFlags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&o.ca, "tls-ca", os.Getenv("MCPREADY_CLIENT_CA"), "CA of the control plane's certificate: connect with TLS (env MCPREADY_CLIENT_CA; empty: plaintext, loopback only)")
	fl.StringVar(&o.cert, "tls-cert", os.Getenv("MCPREADY_CLIENT_CERT"), "client certificate for mTLS to the control plane (env MCPREADY_CLIENT_CERT)")
	fl.StringVar(&o.key, "tls-key", os.Getenv("MCPREADY_CLIENT_KEY"), "client key for mTLS to the control plane (env MCPREADY_CLIENT_KEY)")
	fl.StringVar(&o.serverName, "tls-server-name", "", "name expected in the control plane's certificate (default: the host of the address)")
}

// credentials builds the transport credentials: plaintext without a CA;
// TLS trusting the CA; mTLS when a client certificate and key are given too.
// Bad TLS flags are usage errors.
func (o *tlsOptions) credentials() (credentials.TransportCredentials, error) {
	if o.ca == "" {
		if o.cert != "" || o.key != "" || o.serverName != "" {
			return nil, usagef("--tls-cert, --tls-key and --tls-server-name need --tls-ca, the CA of the server certificate")
		}
		return insecure.NewCredentials(), nil
	}
	pool, err := readCAPool(o.ca, "--tls-ca")
	if err != nil {
		return nil, usagef("%w", err)
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12, ServerName: o.serverName}
	if o.cert != "" || o.key != "" {
		cert, err := tls.LoadX509KeyPair(o.cert, o.key)
		if err != nil {
			return nil, usagef("--tls-cert/--tls-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return credentials.NewTLS(cfg), nil
}

// serverOptions are --server and the TLS flags: how a CLI command reaches
// the control plane. Every command that dials it embeds one.
type serverOptions struct {
	server string
	tls    tlsOptions
}

// addFlags adds --server (default $MCPREADY_SERVER, else 127.0.0.1:7443)
// and the TLS flags to cmd.
func (o *serverOptions) addFlags(cmd *cobra.Command) {
	def := os.Getenv("MCPREADY_SERVER")
	if def == "" {
		def = defaultServer
	}
	cmd.Flags().StringVar(&o.server, "server", def, "control plane address (env MCPREADY_SERVER)")
	o.tls.addFlags(cmd)
}

// dial connects to the control plane (lazily: errors reaching it surface on
// the first call).
func (o *serverOptions) dial() (*grpc.ClientConn, error) {
	creds, err := o.tls.credentials()
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(o.server, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, usagef("--server %q: %w", o.server, err)
	}
	return conn, nil
}

// args returns the flags that reproduce o on another mcpready command line.
func (o *serverOptions) args() []string {
	out := []string{"--server", o.server}
	for _, f := range [][2]string{{"--tls-ca", o.tls.ca}, {"--tls-cert", o.tls.cert}, {"--tls-key", o.tls.key}, {"--tls-server-name", o.tls.serverName}} {
		if f[1] != "" {
			out = append(out, f[0], f[1])
		}
	}
	return out
}

// notFound is a lookup that found nothing (exit 1).
func notFound(format string, args ...any) error {
	return withCode(exitError, fmt.Errorf(format, args...))
}

// readCAPool reads the PEM certificates of file (what names it in errors).
func readCAPool(file, what string) (*x509.CertPool, error) {
	pem, err := readCAPEM(file, what)
	if err != nil {
		return nil, err
	}
	return caPool(x509.NewCertPool(), pem), nil
}

// readCAPEM reads file, which must hold PEM certificates (what names it
// in errors).
func readCAPEM(file, what string) ([]byte, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s %s holds no PEM certificate", what, file)
	}
	return pem, nil
}

// caPool adds the certificates in pem (read with readCAPEM) to pool.
func caPool(pool *x509.CertPool, pem []byte) *x509.CertPool {
	pool.AppendCertsFromPEM(pem)
	return pool
}

// systemRoots is a copy of the system's root CAs (an empty pool where
// there are none).
func systemRoots() *x509.CertPool {
	if roots, err := x509.SystemCertPool(); err == nil {
		return roots
	}
	return x509.NewCertPool()
}

// clientTrusting is an HTTP client (30 s per request) whose TLS trusts
// roots.
func clientTrusting(roots *x509.CertPool) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}
