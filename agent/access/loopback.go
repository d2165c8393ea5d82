package access

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"
)

// ErrRedirectURL is a redirect URL the loopback authorizer cannot serve.
var ErrRedirectURL = errors.New("redirect URL: want http on a loopback address with a port")

// LoopbackAuthorizer is the agent's Authorizer: for each flow it serves
// the redirect URL on its loopback address and logs the authorization URL
// once (with the upstream and principal, never a token) for the user to
// open; the flow ends when the authorization server redirects the user's
// browser back with the flow's state (a redirect with another state is
// refused and the flow goes on), or when ctx ends. Flows with the same redirect URL run one
// at a time (the port is the flow's).
func LoopbackAuthorizer(log *slog.Logger) Authorizer {
	return func(ctx context.Context, r *AuthorizationRequest) (*AuthorizationResponse, error) {
		u, err := url.Parse(r.RedirectURL)
		if err != nil || u.Scheme != "http" || u.Port() == "" {
			return nil, ErrRedirectURL
		}
		if ip := net.ParseIP(u.Hostname()); u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return nil, ErrRedirectURL
		}
		ln, err := listenRetry(ctx, u.Host)
		if err != nil {
			return nil, err
		}
		var state string
		if au, err := url.Parse(r.URL); err == nil {
			state = au.Query().Get("state")
		}
		got := make(chan *AuthorizationResponse, 1)
		srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if req.URL.Path != u.Path {
				http.NotFound(w, req)
				return
			}
			q := req.URL.Query()
			if q.Get("state") != state {
				// Not this flow's redirect (a forged or stale one): ignored.
				http.Error(w, "unknown authorization state", http.StatusBadRequest)
				return
			}
			// The browser gets its answer before the flow goes on (and the
			// server shuts down).
			_, _ = w.Write([]byte("mcpready: authorization received; you can close this window.\n"))
			_ = http.NewResponseController(w).Flush()
			select {
			case got <- &AuthorizationResponse{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}:
			default:
			}
		})}
		go func() { _ = srv.Serve(ln) }()
		defer func() { // let an answer being written finish, then close
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if srv.Shutdown(sctx) != nil {
				_ = srv.Close()
			}
		}()
		log.Info("upstream authorization needed: open the URL in a browser", "upstream", r.Upstream, "principal", r.Principal, "url", r.URL)
		select {
		case res := <-got:
			return res, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// listenRetry listens on addr, waiting while another flow holds it.
func listenRetry(ctx context.Context, addr string) (net.Listener, error) {
	for {
		ln, err := net.Listen("tcp", addr)
		if err == nil {
			return ln, nil
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(200 * time.Millisecond):
		}
	}
}
