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
// over the second after it. The waits the agent chose (what its jitter
// decides, independent of when a loaded machine wakes the timers) each lie
// in [1 s, 2 s] and no 10 ms holds more than 7 of them, nor of the
// instants it scheduled the retries for (uniform jitter puts 8 or more of
// 50 there about once in 100,000 runs; without jitter all 50 waits are
// the same); and the retries as they ran span most of the second. Before, jitter was at most one base backoff (100 ms) whatever
// the Retry-After, and the retries bunched within it.
func TestRetriesDoNotSynchronise(t *testing.T) {
	const (
		callers    = 50
		retryAfter = time.Second
		mostIn10ms = 7
	)
	up := mcptest.New(t, mcptest.Options{})
	pl, st, _ := setup(t, policy(), map[string]*mcpreadyv1.RegistryEntry{"a": entry("test", up.URL)})
	st.Budget = invoke.NewBudget(1, 2*callers)
	var mu sync.Mutex
	start := time.Now()
	// The waits the agent chose, the instants it scheduled (since start)
	// and the retries' starts as they ran.
	var waits, scheduled, retries []time.Duration
	pl.sleep = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		waits, scheduled = append(waits, d), append(scheduled, time.Since(start)+d)
		mu.Unlock()
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	tr := newFake(t)
	// Warm the shared session so every first attempt is a tools/call.
	if res := pl.Call(context.Background(), st, request("test/echo"), tr); res.Answer.IsError {
		t.Fatalf("warm-up: %+v", res.Answer)
	}
	up.SetFaultTimes(mcptest.FaultRateLimited, "tools/call", callers)
	var wg sync.WaitGroup
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
			if wait := at[1].GetStartedAt().AsTime().Sub(at[0].GetStartedAt().AsTime()); wait < retryAfter {
				t.Errorf("retried %v after a Retry-After of %v", wait, retryAfter)
			}
			mu.Lock()
			retries = append(retries, at[1].GetStartedAt().AsTime().Sub(start))
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(waits) != callers || len(retries) != callers { // waits and scheduled are appended together
		t.Fatalf("%d waits, %d retries; want %d of each", len(waits), len(retries), callers)
	}
	for _, w := range waits {
		if w < retryAfter || w > 2*retryAfter {
			t.Fatalf("wait %v outside [%v, %v]", w, retryAfter, 2*retryAfter)
		}
	}
	if most := mostWithin(waits, 10*time.Millisecond); most > mostIn10ms {
		t.Fatalf("the agent chose %d of %d waits within 10 ms (at most %d allowed): %v", most, callers, mostIn10ms, waits)
	}
	if most := mostWithin(scheduled, 10*time.Millisecond); most > mostIn10ms {
		t.Fatalf("the agent scheduled %d of %d retries within 10 ms (at most %d allowed)", most, callers, mostIn10ms)
	}
	// As they ran: the span fails retries that bunch however the waits
	// were chosen (a timer wheel that fires them together).
	slices.Sort(retries)
	if span := retries[len(retries)-1] - retries[0]; span < 600*time.Millisecond {
		t.Fatalf("retries ran within %v of each other", span)
	}
	t.Logf("at most %d of %d waits, %d scheduled retries, %d retries as run in any 10 ms; run over %v", mostWithin(waits, 10*time.Millisecond),
		callers, mostWithin(scheduled, 10*time.Millisecond), mostWithin(retries, 10*time.Millisecond), retries[len(retries)-1]-retries[0])
}

// mostWithin is the largest number of ds within any window of length w
// (it sorts ds).
func mostWithin(ds []time.Duration, w time.Duration) int {
	slices.Sort(ds)
	most := 0
	for i, j := 0, 0; i < len(ds); i++ {
		for ds[i]-ds[j] >= w {
			j++
		}
		most = max(most, i-j+1)
	}
	return most
}

// An upstream that asks to be retried in the year 9999 (a Retry-After
// that parses to the largest duration) gets a rate-limited answer and a
// receipt, with no retry: before, the jitter on that wait overflowed and
// panicked in the middle of the call.
func TestRetryAfterFarFuture(t *testing.T) {
	up := mcptest.New(t, mcptest.Options{})
	pl, st, _ := setup(t, policy(), map[string]*mcpreadyv1.RegistryEntry{"a": entry("test", up.URL)})
	tr := newFake(t)
	if res := pl.Call(context.Background(), st, request("test/echo"), tr); res.Answer.IsError {
		t.Fatalf("warm-up: %+v", res.Answer)
	}
	for _, ra := range []string{"Fri, 31 Dec 9999 23:59:59 GMT", "18446744074"} {
		up.SetRetryAfter(ra)
		up.SetFaultTimes(mcptest.FaultRateLimited, "tools/call", 1)
		res := pl.Call(context.Background(), st, request("test/echo"), tr)
		at := res.Receipt.GetAttempts()
		if !res.Answer.IsError || len(at) != 1 || at[0].GetOutcome() != mcpreadyv1.OutcomeClass_OUTCOME_CLASS_RATE_LIMITED {
			t.Errorf("Retry-After %q: answer %+v attempts %v", ra, res.Answer, at)
		}
	}
}
