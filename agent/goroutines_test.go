package agent

import (
	"runtime/metrics"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/internal/mcptest"
)

// goroutinesCreated is the number of goroutines this process has started.
func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// A tools/call through the agent starts at most the one goroutine net/http
// starts for every request whose body was read (its background read) on
// top of what the same call made directly starts (the go-sdk client's and
// upstream's). Each goroutine started on the call's path wakes another
// thread, which on a small machine costs more than the goroutine: the
// transport's watch of each request used to start one (a value context
// hid the isolated context's AfterFunc), and the end of each response
// stream was drained by another.
func TestFastCallGoroutines(t *testing.T) {
	up := mcptest.New(t, mcptest.Options{})
	a := benchAgent(t, up, nil)
	direct, via := benchSession(t, up.URL), benchSession(t, "http://"+a.Addr()+"/mcp/servers/test")
	for range 20 {
		echo(t, direct)
		echo(t, via)
	}
	const calls = 300
	perCall := func(cs *mcp.ClientSession) float64 {
		before := goroutinesCreated()
		for range calls {
			echo(t, cs)
		}
		return float64(goroutinesCreated()-before) / calls
	}
	d, v := perCall(direct), perCall(via)
	if v-d > 1.5 {
		t.Fatalf("a call through the agent starts %.2f goroutines, %.2f more than made directly (%.2f); want at most net/http's one more", v, v-d, d)
	}
	t.Logf("goroutines per call: direct %.2f, through the agent %.2f", d, v)
}
