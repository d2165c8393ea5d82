package mcptest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ChargeInput is the input of the "charge" tool. Key is read only when
// the Ledger's Argument is "key".
type ChargeInput struct {
	Amount int    `json:"amount" jsonschema:"amount to charge"`
	Key    string `json:"key,omitempty" jsonschema:"idempotency key, when the provider reads it from the arguments"`
}

// Ledger is the state of an idempotent, state-changing "charge" tool that
// counts its effects by idempotency key, as a payment provider does: the
// first call with a key charges and remembers the result; a repeat of the
// key returns the remembered result without charging; a call without a key
// always charges. A repeat with another amount is refused with isError, as
// the Idempotency-Key draft's 422 is (but counted in Conflicts).
type Ledger struct {
	// Header is the HTTP header the key is read from ("" for none);
	// Argument the tool argument ("key" or ""); Meta the _meta field ("" for
	// none). The first non-empty source wins.
	Header, Argument, Meta string

	mu        sync.Mutex
	effects   int
	calls     int
	conflicts int
	byKey     map[string]int // key -> amount charged
	perKey    map[string]int // key -> calls that carried it
}

// AddChargeTool adds "charge" to s, its effects counted by l.
func AddChargeTool(s *mcp.Server, l *Ledger) {
	mcp.AddTool(s, &mcp.Tool{
		Name:        "charge",
		Description: "Charges the given amount once per idempotency key.",
	}, func(_ context.Context, req *mcp.CallToolRequest, in ChargeInput) (*mcp.CallToolResult, any, error) {
		key := ""
		if l.Header != "" && req.Extra != nil && req.Extra.Header != nil {
			key = req.Extra.Header.Get(l.Header)
		}
		if key == "" && l.Argument == "key" {
			key = in.Key
		}
		if key == "" && l.Meta != "" {
			key, _ = req.Params.Meta[l.Meta].(string)
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.calls++
		if key != "" {
			l.perKey[key]++
			if amt, ok := l.byKey[key]; ok {
				if amt != in.Amount {
					l.conflicts++
					return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "key reused with another amount"}}}, nil, nil
				}
				return result(amt), nil, nil
			}
			l.byKey[key] = in.Amount
		}
		l.effects++
		return result(in.Amount), nil, nil
	})
}

func result(amount int) *mcp.CallToolResult {
	b, _ := json.Marshal(map[string]int{"charged": amount})
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}
}

// NewLedger returns an empty Ledger reading the key from header, argument
// and meta (see Ledger).
func NewLedger(header, argument, meta string) *Ledger {
	return &Ledger{Header: header, Argument: argument, Meta: meta, byKey: map[string]int{}, perKey: map[string]int{}}
}

// Effects is how many charges were applied.
func (l *Ledger) Effects() int { l.mu.Lock(); defer l.mu.Unlock(); return l.effects }

// Calls is how many tools/call reached the tool.
func (l *Ledger) Calls() int { l.mu.Lock(); defer l.mu.Unlock(); return l.calls }

// Conflicts is how many calls reused a key with another amount.
func (l *Ledger) Conflicts() int { l.mu.Lock(); defer l.mu.Unlock(); return l.conflicts }

// Keys returns the distinct keys seen.
func (l *Ledger) Keys() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.perKey))
	for k := range l.perKey {
		out = append(out, k)
	}
	return out
}

// String summarises the ledger for test failures (never a key).
func (l *Ledger) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprintf("calls %d effects %d conflicts %d keys %d", l.calls, l.effects, l.conflicts, len(l.perKey))
}
