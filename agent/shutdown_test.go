package agent

import (
	"context"
	"testing"
	"time"

	"github.com/mcpready/mcpready/agent/internal/mcptest"
)

// Read-only calls answered just before the agent stops have their receipts
// handed to the spool writer, which finishes and appends them only after
// its linger (20ms): shutting down within that linger still spools every
// one of them, by the writer before it stops or by its Drain after, none
// is lost. (A writer that stopped at once and no Drain spooled none.)
func TestShutdownSpoolsDeferredReceipts(t *testing.T) {
	up := mcptest.New(t, mcptest.Options{})
	a := configuredAgent(t, up, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = a.Run(ctx); close(done) }()
	stopped := false
	defer func() {
		if !stopped {
			cancel()
			<-done
		}
	}()
	waitInstalled(a)
	cs := benchSession(t, "http://"+a.Addr()+"/mcp/servers/test")
	echo(t, cs)
	time.Sleep(200 * time.Millisecond) // everything so far is appended
	before := a.spool.Stats().Depth
	const calls = 5
	for range calls {
		echo(t, cs)
	}
	cancel()
	<-done
	stopped = true
	if got := a.spool.Stats().Depth - before; got != calls {
		t.Fatalf("%d receipts spooled for the %d calls answered before shutdown", got, calls)
	}
}
