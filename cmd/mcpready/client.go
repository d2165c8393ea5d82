package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// defaultServer is the control plane's local default address.
const defaultServer = "127.0.0.1:7443"

// addServerFlag adds --server to a command that talks to the control plane.
// Its default is $MCPREADY_SERVER, else defaultServer.
func addServerFlag(cmd *cobra.Command, dst *string) {
	def := os.Getenv("MCPREADY_SERVER")
	if def == "" {
		def = defaultServer
	}
	cmd.Flags().StringVar(dst, "server", def, "control plane address (env MCPREADY_SERVER)")
}

// dialServer connects to the control plane at addr. TLS is used when
// $MCPREADY_CLIENT_CA names the CA of the server certificate; a client
// certificate for mTLS comes from $MCPREADY_CLIENT_CERT and
// $MCPREADY_CLIENT_KEY. Without them the connection is plaintext (the
// control plane only allows that on loopback).
func dialServer(addr string) (*grpc.ClientConn, error) {
	creds, err := clientCredentials()
	if err != nil {
		return nil, withCode(exitUsage, err)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, withCode(exitUnavailable, err)
	}
	return conn, nil
}

func clientCredentials() (credentials.TransportCredentials, error) {
	return clientTLS(os.Getenv("MCPREADY_CLIENT_CA"), os.Getenv("MCPREADY_CLIENT_CERT"), os.Getenv("MCPREADY_CLIENT_KEY"))
}

// clientTLS builds the transport credentials for a connection to the
// control plane: plaintext without caFile; TLS trusting caFile; mTLS when a
// client certificate and key are given too.
func clientTLS(caFile, certFile, keyFile string) (credentials.TransportCredentials, error) {
	if caFile == "" {
		if certFile != "" || keyFile != "" {
			return nil, fmt.Errorf("a client certificate needs the CA of the server certificate too")
		}
		return insecure.NewCredentials(), nil
	}
	pool, err := readCAPool(caFile, "server CA")
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if certFile != "" || keyFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return credentials.NewTLS(cfg), nil
}

// readCAPool reads the PEM certificates of file (what names it in errors).
func readCAPool(file, what string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s %s holds no PEM certificate", what, file)
	}
	return pool, nil
}
