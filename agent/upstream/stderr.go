package upstream

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/mcpready/mcpready/agent/config"
)

// Bounds of a stdio child's stderr in the agent's log.
const (
	// stderrLineBytes is the longest line logged; the rest of a longer
	// line is cut off (the record says so).
	stderrLineBytes = 1024
	// stderrBurst lines are logged at once, then stderrPerSecond a
	// second; lines past that are dropped and counted in the next line
	// logged.
	stderrBurst     = 100
	stderrPerSecond = 10
	// minRedacted is the shortest configured value that is redacted (a
	// shorter one would blank out ordinary text).
	minRedacted = 4
)

// stderrLog is a stdio child's stderr: each line (bounded) is logged
// through slog with the values of the child's configured environment
// (Env and EnvFrom, where its secrets are) replaced by "[redacted]", at a
// bounded rate. It is an io.Writer for exec.Cmd.Stderr.
type stderrLog struct {
	log    *slog.Logger
	redact *strings.Replacer
	keep   int // bytes of a line buffered: stderrLineBytes plus the longest secret
	now    func() time.Time

	mu        sync.Mutex
	line      []byte
	truncated bool
	tokens    float64
	last      time.Time
	dropped   int
}

// newStderrLog returns the stderr sink of the child of u whose environment
// is env ("NAME=value").
func newStderrLog(log *slog.Logger, u config.Upstream, env []string) *stderrLog {
	var pairs []string
	longest := 0
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		_, literal := u.Env[k]
		_, passed := u.EnvFrom[k]
		if (literal || passed) && len(v) >= minRedacted {
			pairs = append(pairs, v, "[redacted]")
			longest = max(longest, len(v))
		}
	}
	return &stderrLog{log: log.With("server", u.Name), redact: strings.NewReplacer(pairs...), keep: stderrLineBytes + longest,
		now: time.Now, tokens: stderrBurst}
}

func (l *stderrLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if room := l.keep - len(l.line); room < len(chunk) {
			l.line = append(l.line, chunk[:max(room, 0)]...)
			l.truncated = true
		} else {
			l.line = append(l.line, chunk...)
		}
		if i < 0 {
			break
		}
		l.emitLocked()
		p = p[i+1:]
	}
	return n, nil
}

// emitLocked logs the buffered line, if the rate allows. Caller holds mu.
func (l *stderrLog) emitLocked() {
	line, truncated := l.line, l.truncated
	l.line, l.truncated = l.line[:0], false
	now := l.now()
	if !l.last.IsZero() {
		l.tokens = min(stderrBurst, l.tokens+now.Sub(l.last).Seconds()*stderrPerSecond)
	}
	l.last = now
	if l.tokens < 1 {
		l.dropped++
		return
	}
	l.tokens--
	// Redact first, then cut: a secret that straddles the length bound is
	// wholly in the buffer (keep), so no prefix of it is logged.
	text := l.redact.Replace(strings.TrimRight(string(line), "\r"))
	if len(text) > stderrLineBytes {
		text, truncated = strings.ToValidUTF8(text[:stderrLineBytes], ""), true
	}
	attrs := []any{"line", text}
	if truncated {
		attrs = append(attrs, "truncated", true)
	}
	if l.dropped > 0 {
		attrs = append(attrs, "dropped_before", l.dropped)
		l.dropped = 0
	}
	l.log.Info("stdio upstream stderr", attrs...)
}
