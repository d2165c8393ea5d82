package agent

import (
	"context"
	"net/http"
	"time"

	"github.com/mcpready/mcpready/agent/peercred"
)

// listenSocket opens Options.Socket, when set: the front for local
// processes identified by their peer credentials (config socketPrincipals).
func (a *Agent) listenSocket() error {
	if a.opts.Socket == "" {
		return nil
	}
	l, err := peercred.Listen(a.opts.Socket)
	if err != nil {
		return err
	}
	a.sock = l
	return nil
}

// serveSocket serves the front on the socket (if any) and returns the
// function that shuts it down; a serve error goes to errc.
func (a *Agent) serveSocket(errc chan<- error) func() {
	if a.sock == nil {
		return func() {}
	}
	srv := &http.Server{Handler: peercred.Handler(a.cfg, a.Handler()), ConnContext: peercred.ConnContext, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(a.sock); err != http.ErrServerClosed {
			select {
			case errc <- err:
			default: // the TCP front's error is reported already
			}
		}
	}()
	a.opts.Logger.Info("agent: serving on socket", "path", a.opts.Socket)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}
}
