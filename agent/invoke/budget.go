package invoke

import (
	"math"
	"sync/atomic"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// Budget is the agent-wide retry budget, a token bucket: every call deposits
// Ratio tokens (up to Capacity), every retry or hedge withdraws one. With
// Ratio 0.2, sustained retries are bounded to 20% of calls, so a failing
// upstream never sees a retry storm. Safe for concurrent use, lock-free.
type Budget struct {
	ratio    int64 // milli-tokens deposited per call
	capacity int64 // milli-tokens
	tokens   atomic.Int64
}

// DefaultBudgetRatio and DefaultBudgetCapacity apply to zero values.
const (
	DefaultBudgetRatio    = 0.2
	DefaultBudgetCapacity = 10
)

// NewBudget returns a full bucket. ratio <= 0 means DefaultBudgetRatio;
// capacity <= 0 means DefaultBudgetCapacity tokens.
func NewBudget(ratio float64, capacity int) *Budget {
	if ratio <= 0 || math.IsNaN(ratio) {
		ratio = DefaultBudgetRatio
	}
	if ratio > 1 {
		ratio = 1
	}
	if capacity <= 0 {
		capacity = DefaultBudgetCapacity
	}
	b := &Budget{ratio: int64(ratio * 1000), capacity: int64(capacity) * 1000}
	b.tokens.Store(b.capacity)
	return b
}

// BudgetFromPolicy builds the budget of Policy.retry (nil allowed).
func BudgetFromPolicy(r *mcpreadyv1.RetryRules) *Budget {
	return NewBudget(r.GetBudgetRatio(), 0)
}

// Deposit credits one call.
func (b *Budget) Deposit() {
	for {
		t := b.tokens.Load()
		n := min(t+b.ratio, b.capacity)
		if n == t || b.tokens.CompareAndSwap(t, n) {
			return
		}
	}
}

// Withdraw takes one token for a retry or hedge; false when exhausted.
func (b *Budget) Withdraw() bool {
	for {
		t := b.tokens.Load()
		if t < 1000 {
			return false
		}
		if b.tokens.CompareAndSwap(t, t-1000) {
			return true
		}
	}
}

// Tokens returns the whole tokens available (for metrics and tests).
func (b *Budget) Tokens() int { return int(b.tokens.Load() / 1000) }
