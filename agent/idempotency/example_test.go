package idempotency_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/mcpready/mcpready/agent/idempotency"
	"github.com/mcpready/mcpready/agent/receipt"
)

// A key is bound to the scope and the arguments it was first used with.
// The same key with the same arguments is a repeat; with other arguments,
// or from another principal class, it is refused before any upstream sees
// it. The binding is durable: it survives a restart.
func Example() {
	dir, err := os.MkdirTemp("", "idempotency-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	opts := idempotency.Options{Now: func() time.Time { return now }}

	st, err := idempotency.Open(dir, opts)
	if err != nil {
		log.Fatal(err)
	}
	const key = "order-42" // what the client sent in _meta[idempotency.MetaKey]
	scope := idempotency.Scope("acme", "dev", "tickets_create")
	args := receipt.ArgumentsDigest(json.RawMessage(`{"title":"Printer on fire","priority":1}`))

	b, repeat, err := st.Bind(key, scope, "alice", args, time.Hour)
	fmt.Println("first:", b.Scope, "repeat:", repeat, "err:", err, "expires:", b.Expires.Format(time.RFC3339))
	_ = st.Finish(b.Ref, "tickets-eu", "SUCCESS") // the call ran

	// The client retries the same payload (key order does not matter).
	same := receipt.ArgumentsDigest(json.RawMessage(`{"priority":1,"title":"Printer on fire"}`))
	b, repeat, err = st.Bind(key, scope, "alice", same, time.Hour)
	fmt.Println("retry:", "repeat:", repeat, "err:", err, "ran on:", b.Entry)

	// The same key with other arguments, or from another principal class.
	other := receipt.ArgumentsDigest(json.RawMessage(`{"title":"Printer on fire","priority":2}`))
	_, _, err = st.Bind(key, scope, "alice", other, time.Hour)
	fmt.Println("other args:", errors.Is(err, idempotency.ErrKeyReused), err)
	_, _, err = st.Bind(key, idempotency.Scope("acme", "intern", "tickets_create"), "alice", args, time.Hour)
	fmt.Println("other scope:", errors.Is(err, idempotency.ErrKeyScope), err)
	_ = st.Close()

	// After a restart the binding and the outcome of its call are still there.
	st, err = idempotency.Open(dir, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	b, ok := st.Lookup(key)
	fmt.Println("reopened:", ok, b.Entry, b.Outcome)

	// Once the retention has passed, the key is forgotten.
	now = now.Add(time.Hour)
	_, ok = st.Lookup(key)
	fmt.Println("an hour later:", ok)
	// Output:
	// first: acme;dev/tickets_create repeat: false err: <nil> expires: 2026-12-01T10:00:00Z
	// retry: repeat: true err: <nil> ran on: tickets-eu
	// other args: true idempotency: key reused with a different payload: first used with other arguments
	// other scope: true idempotency: key bound to another tenant, principal or tool: bound to another tenant class, principal class or tool
	// reopened: true tickets-eu SUCCESS
	// an hour later: false
}

// Scope keeps apart callers that plain concatenation would confuse.
func ExampleScope() {
	fmt.Println(idempotency.Scope("", "dev", "docs/lookup"))
	fmt.Println(idempotency.Scope("", "acme;dev", "docs/lookup"))
	fmt.Println(idempotency.Scope("acme", "dev", "docs/lookup"))
	// Output:
	// dev/docs/lookup
	// acme%3Bdev/docs/lookup
	// acme;dev/docs/lookup
}

// FromMeta reads the key a client put in _meta. A value that is not a
// string is an error, not "no key": the agent must not allocate a key of
// its own for it.
func ExampleFromMeta() {
	for _, meta := range []map[string]any{
		{idempotency.MetaKey: "order-42"},
		{},
		{idempotency.MetaKey: 42.0},
	} {
		key, present, err := idempotency.FromMeta(meta)
		fmt.Printf("%q %v %v\n", key, present, err)
	}
	// Output:
	// "order-42" true <nil>
	// "" false <nil>
	// "" true idempotency: malformed key: _meta "mcpready.dev/idempotency-key" is a number, not a string
}

// CheckKey refuses malformed keys without repeating them.
func ExampleCheckKey() {
	fmt.Println(idempotency.CheckKey("4f8e2c1a-0b9d-4e57-9a3c-6d2e1f0b7c58"))
	fmt.Println(idempotency.CheckKey("order 42"))
	fmt.Println(idempotency.CheckKey(""))
	// Output:
	// <nil>
	// idempotency: malformed key: byte 5 is not printable ASCII
	// idempotency: malformed key: empty
}
