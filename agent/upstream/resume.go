package upstream

// Resuming a lost response stream (Streamable HTTP, 2025-11-25): a server
// that gave its response stream's events ids may close the stream before
// the response; the client reconnects with GET and Last-Event-ID after the
// stream's retry time, and the server replays what followed. The request
// itself is never sent again (tools/call is not idempotent).

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/mcpready/mcpready/internal/sse"
)

// maxResumes bounds the reconnections of one response stream.
const maxResumes = 2

// defaultRetry is the reconnection time of a stream that set none.
const defaultRetry = time.Second

// maxRetry bounds a server's retry field.
const maxRetry = 30 * time.Second

// stream is the response stream of one call: its current body, what its
// events said about resuming, and the reconnections made.
type stream struct {
	body    io.ReadCloser
	meta    sse.Meta
	resumes int
	resumed bool // body is a reconnection's (closed here, not by the caller)
}

func (st *stream) close() {
	if st.resumed {
		st.body.Close()
	}
}

// resume reconnects st after its retry time when its events had ids and
// reconnections are left, and reports whether st.body is a new stream.
func (s *Session) resume(ctx context.Context, st *stream) bool {
	if st.meta.LastID == "" || st.resumes >= maxResumes {
		return false
	}
	st.resumes++
	wait := st.meta.Retry
	if wait == 0 {
		wait = defaultRetry
	}
	t := time.NewTimer(min(wait, maxRetry))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	}
	req := s.http.newRequest(ctx, http.MethodGet, http.Header{}, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", st.meta.LastID)
	req.Header.Set("Mcp-Session-Id", s.cs.ID())
	req.Header.Set("Mcp-Protocol-Version", s.ProtocolVersion())
	resp, err := s.http.client.Do(req)
	if err != nil {
		return false
	}
	if resp.StatusCode != http.StatusOK || mediaType(resp.Header.Get("Content-Type")) != "text/event-stream" {
		finish(resp.Body)
		return false
	}
	st.close()
	st.body, st.resumed = resp.Body, true
	return true
}
