package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/mcpready/mcpready/agent"
	"github.com/mcpready/mcpready/internal/sse"
)

// connectOptions are the flags of connect.
type connectOptions struct {
	agentURL, upstream, tokenFile string
}

func newConnectCmd() *cobra.Command {
	o := &connectOptions{}
	cmd := &cobra.Command{
		Use:   "connect [--agent URL] [--upstream NAME] [--token-file F]",
		Short: "Bridge stdio to the local agent, for MCP clients that only launch stdio servers",
		Long: `Bridge an MCP client speaking stdio to the running host agent.

Configure your MCP client to launch "mcpready connect" as a stdio server.
Every JSON-RPC message is relayed unchanged to the agent's /mcp endpoint (or
/mcp/servers/NAME with --upstream) over Streamable HTTP, and everything the
agent sends back (responses, notifications, elicitation and sampling
requests) is written to standard output, including what belongs to no
request (list_changed, resource updates), which a session-era (2025-11-25)
agent sends on a standalone stream the bridge keeps open. The bearer token
is read from --token-file (or $MCPREADY_TOKEN) and never printed.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	fl := cmd.Flags()
	fl.StringVar(&o.agentURL, "agent", "http://"+agent.DefaultListen, "agent base URL")
	fl.StringVar(&o.upstream, "upstream", "", "connect to /mcp/servers/NAME instead of the aggregate /mcp")
	fl.StringVar(&o.tokenFile, "token-file", "", "file holding this client's bearer token (default $MCPREADY_TOKEN)")
	return cmd
}

func (o *connectOptions) run(cmd *cobra.Command) error {
	f := o
	endpoint, err := agentEndpoint(f.agentURL, f.upstream)
	if err != nil {
		return withCode(exitUsage, err)
	}
	token := os.Getenv("MCPREADY_TOKEN")
	if f.tokenFile != "" {
		b, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return usagef("connect: --token-file: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return bridge(ctx, cmd.InOrStdin(), cmd.OutOrStdout(), endpoint, token)
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

// bridgeTransport adds the client's bearer token and, once initialize has
// answered, the negotiated protocol version to every request.
type bridgeTransport struct {
	token    string
	protocol *atomic.Value // string
}

func (b bridgeTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	pv, _ := b.protocol.Load().(string)
	if b.token != "" || pv != "" {
		r = r.Clone(r.Context())
		if b.token != "" {
			r.Header.Set("Authorization", "Bearer "+b.token)
		}
		if pv != "" && r.Header.Get("Mcp-Protocol-Version") == "" {
			r.Header.Set("Mcp-Protocol-Version", pv)
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

// maxLine bounds one JSON-RPC message read from the local client.
const maxLine = 16 << 20

// bridge relays JSON-RPC messages, one per line, between a local client
// (in/out: stdio) and the agent's Streamable HTTP endpoint until either side
// closes. A line that is not JSON-RPC is answered with a parse error and
// the bridge carries on.
func bridge(ctx context.Context, in io.Reader, out io.Writer, endpoint, token string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rt := bridgeTransport{token: token, protocol: new(atomic.Value)}
	hc := &http.Client{Transport: rt}
	remote, err := (&mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc}).Connect(ctx)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer remote.Close()
	var wmu sync.Mutex
	write := func(msg jsonrpc.Message) error {
		b, err := jsonrpc.EncodeMessage(msg)
		if err != nil {
			return err
		}
		wmu.Lock()
		defer wmu.Unlock()
		_, err = out.Write(append(b, '\n'))
		return err
	}
	errc := make(chan error, 2)
	var initID atomic.Value // jsonrpc.ID of the client's initialize
	var inflight sync.WaitGroup
	go func() { // local -> agent; calls are sent concurrently so a long call does not block others
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 0, 64<<10), maxLine)
		for sc.Scan() {
			line := bytes.TrimSpace(sc.Bytes())
			if len(line) == 0 {
				continue
			}
			msg, err := jsonrpc.DecodeMessage(line)
			if err != nil {
				_ = write(&jsonrpc.Response{Error: &jsonrpc.Error{Code: jsonrpc.CodeParseError, Message: "parse error: " + err.Error()}})
				continue
			}
			if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "initialize" {
				initID.Store(req.ID)
			}
			if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() && req.Method != "initialize" {
				inflight.Add(1)
				go func() {
					defer inflight.Done()
					if err := remote.Write(ctx, msg); err != nil {
						_ = write(&jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "mcpready agent unreachable: " + err.Error()}})
					}
				}()
				continue
			}
			if err := remote.Write(ctx, msg); err != nil {
				errc <- err
				return
			}
		}
		inflight.Wait()
		errc <- sc.Err() // nil at EOF: the client is done
	}()
	go func() { // agent -> local
		for {
			msg, err := remote.Read(ctx)
			if err != nil {
				errc <- err
				return
			}
			if resp, ok := msg.(*jsonrpc.Response); ok && resp.Error == nil && resp.ID == initID.Load() {
				var res struct {
					ProtocolVersion string `json:"protocolVersion"`
				}
				if json.Unmarshal(resp.Result, &res) == nil && res.ProtocolVersion != "" {
					rt.protocol.Store(res.ProtocolVersion)
					// A session (2025-era) agent sends what belongs to no
					// request (list_changed, resource updates, server
					// requests) on a standalone GET stream.
					if res.ProtocolVersion < "2026-07-28" && remote.SessionID() != "" {
						go listen(ctx, hc, endpoint, remote.SessionID(), write)
					}
				}
			}
			if err := write(msg); err != nil {
				errc <- err
				return
			}
		}
	}()
	err = <-errc
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// listenRetry bounds the wait between reconnections of the standalone stream.
const listenRetry = 30 * time.Second

// listen relays the session's standalone SSE stream to the local client
// until ctx ends, reconnecting with a growing delay. An agent that offers no
// standalone stream (405) is not asked again.
func listen(ctx context.Context, hc *http.Client, endpoint, session string, write func(jsonrpc.Message) error) {
	delay := 500 * time.Millisecond
	for ctx.Err() == nil {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
		if err != nil {
			return
		}
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", session)
		resp, err := hc.Do(req)
		if err == nil {
			if resp.StatusCode == http.StatusMethodNotAllowed {
				resp.Body.Close()
				return
			}
			if resp.StatusCode == http.StatusOK {
				delay = 500 * time.Millisecond
				r := bufio.NewReader(resp.Body)
				for {
					data, err := sse.ReadEvent(r, maxLine)
					if err != nil {
						break
					}
					if msg, err := jsonrpc.DecodeMessage(data); err == nil && len(data) > 0 {
						_ = write(msg)
					}
				}
			}
			resp.Body.Close()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, listenRetry)
	}
}
