package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/mcpready/mcpready/agent"
)

var connectFlags struct {
	agentURL, upstream, tokenFile string
}

var connectCmd = &cobra.Command{
	Use:   "connect [--agent URL] [--upstream NAME] [--token-file F]",
	Short: "Bridge stdio to the local agent, for MCP clients that only launch stdio servers",
	Long: `Bridge an MCP client speaking stdio to the running host agent.

Configure your MCP client to launch "mcpready connect" as a stdio server.
Every JSON-RPC message is relayed unchanged to the agent's /mcp endpoint (or
/mcp/servers/NAME with --upstream) over Streamable HTTP, and everything the
agent sends back (responses, notifications, elicitation and sampling
requests) is written to standard output. The bearer token is read from
--token-file (or $MCPREADY_TOKEN) and never printed.`,
	Args: noArgs,
	RunE: runConnect,
}

func init() {
	fl := connectCmd.Flags()
	fl.StringVar(&connectFlags.agentURL, "agent", "http://"+agent.DefaultListen, "agent base URL")
	fl.StringVar(&connectFlags.upstream, "upstream", "", "connect to /mcp/servers/NAME instead of the aggregate /mcp")
	fl.StringVar(&connectFlags.tokenFile, "token-file", "", "file holding this client's bearer token (default $MCPREADY_TOKEN)")
	connectCmd.SetFlagErrorFunc(usageError)
	root.AddCommand(connectCmd)
}

func runConnect(cmd *cobra.Command, _ []string) error {
	defer resetFlags(cmd)
	f := connectFlags
	endpoint, err := agentEndpoint(f.agentURL, f.upstream)
	if err != nil {
		return withCode(exitUsage, err)
	}
	token := os.Getenv("MCPREADY_TOKEN")
	if f.tokenFile != "" {
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return withCode(exitUsage, fmt.Errorf("connect: --token-file: %w", err))
		}
		token = strings.TrimSpace(string(b))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return bridge(ctx, &mcp.StdioTransport{}, endpoint, token)
}

// agentEndpoint is the MCP endpoint of the agent at base (for one upstream when named).
func agentEndpoint(base, upstream string) (string, error) {
	u, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("connect: --agent %q is not an http(s) URL", base)
	}
	u.Path = strings.TrimRight(u.Path, "/") + "/mcp"
	if upstream != "" {
		u.Path += "/servers/" + upstream
	}
	return u.String(), nil
}

// bearerTransport adds the client's bearer token to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.token != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// bridge relays JSON-RPC messages between a local transport (stdio) and the
// agent's Streamable HTTP endpoint until either side closes.
func bridge(ctx context.Context, local mcp.Transport, endpoint, token string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	remote, err := (&mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: bearerTransport{token}}}).Connect(ctx)
	if err != nil {
		return withCode(exitUnavailable, fmt.Errorf("connect: %w", err))
	}
	defer remote.Close()
	near, err := local.Connect(ctx)
	if err != nil {
		return err
	}
	defer near.Close()
	errc := make(chan error, 2)
	go func() { // local -> agent; calls are sent concurrently so a long call does not block others
		for {
			msg, err := near.Read(ctx)
			if err != nil {
				errc <- err
				return
			}
			if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() && req.Method != "initialize" {
				go func() {
					if err := remote.Write(ctx, msg); err != nil {
						_ = near.Write(ctx, &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "mcpready agent unreachable: " + err.Error()}})
					}
				}()
				continue
			}
			if err := remote.Write(ctx, msg); err != nil {
				errc <- err
				return
			}
		}
	}()
	go func() { // agent -> local
		for {
			msg, err := remote.Read(ctx)
			if err != nil {
				errc <- err
				return
			}
			if err := near.Write(ctx, msg); err != nil {
				errc <- err
				return
			}
		}
	}()
	err = <-errc
	if errors.Is(err, context.Canceled) || errors.Is(err, mcp.ErrConnectionClosed) || strings.Contains(fmt.Sprint(err), "EOF") {
		return nil
	}
	return err
}
