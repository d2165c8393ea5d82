package main

import (
	"os"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
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

// dialServer connects to the control plane at addr.
func dialServer(addr string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, withCode(exitUnavailable, err)
	}
	return conn, nil
}
