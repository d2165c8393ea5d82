// Package peercred serves the agent's MCP front on a Unix-domain socket
// whose clients are identified by their peer credentials (SO_PEERCRED
// uid/gid), mapped to principals by config.SocketPrincipals.
//
// It must not trust anything a client sends about who it is: whatever
// Authorization header a socket client sends is replaced by the in-memory
// token of the principal its credentials map to, or the request is refused
// (HTTP 401). It decides nothing else.
package peercred

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"

	"github.com/mcpready/mcpready/agent/config"
)

// ErrUnsupported is returned where peer credentials are not available.
var ErrUnsupported = errors.New("peercred: peer credentials are not supported on this platform")

// Cred is a connected peer's identity as the kernel reports it.
type Cred struct {
	PID, UID, GID uint32
}

type credKey struct{}

// ConnContext is the http.Server ConnContext of a socket listener: it
// records the peer credentials of c (none when they cannot be read).
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return ctx
	}
	cr, err := peerCred(uc)
	if err != nil {
		return ctx
	}
	return context.WithValue(ctx, credKey{}, cr)
}

// CredFrom returns the peer credentials ConnContext recorded.
func CredFrom(ctx context.Context) (Cred, bool) {
	cr, ok := ctx.Value(credKey{}).(Cred)
	return cr, ok
}

// Handler serves h as the principal each request's peer maps to in cfg:
// the request's Authorization header is replaced by that principal's
// in-memory token; a peer that maps to no principal (or whose credentials
// are unknown) gets HTTP 401.
func Handler(cfg *config.Config, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cr, ok := CredFrom(r.Context())
		tok, mapped := "", false
		if ok {
			tok, mapped = cfg.PeerToken(cr.UID, cr.GID)
		}
		if !mapped {
			http.Error(w, "unauthenticated: no socket principal for this peer", http.StatusUnauthorized)
			return
		}
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+tok)
		h.ServeHTTP(w, r)
	})
}

// Listen listens on a Unix-domain socket at path (a stale socket file is
// replaced; any other existing file is an error), readable and writable by
// everyone: who may act as whom is decided by the peer credentials.
func Listen(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("peercred: %s exists and is not a socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o666); err != nil {
		_ = l.Close()
		return nil, err
	}
	return l, nil
}
