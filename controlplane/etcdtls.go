package controlplane

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// ErrEtcdTLS: the etcd TLS files are incomplete or unreadable.
var ErrEtcdTLS = errors.New("invalid etcd TLS configuration")

// EtcdClientTLS builds Options.EtcdTLS from PEM files: ca verifies etcd's
// server certificate; cert and key (both or neither) are the control
// plane's client certificate for etcd's client-certificate auth.
func EtcdClientTLS(ca, cert, key string) (*tls.Config, error) {
	if ca == "" {
		return nil, fmt.Errorf("%w: a CA is required", ErrEtcdTLS)
	}
	if (cert == "") != (key == "") {
		return nil, fmt.Errorf("%w: give both the client certificate and its key, or neither", ErrEtcdTLS)
	}
	pem, err := os.ReadFile(ca)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrEtcdTLS, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%w: %s holds no PEM certificate", ErrEtcdTLS, ca)
	}
	c := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrEtcdTLS, err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}
