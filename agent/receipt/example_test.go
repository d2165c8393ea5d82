package receipt_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/mcpready/mcpready/agent/receipt"
)

// The receipt of one call, built as the call pipeline builds it: Start
// when the call arrives, Arguments and Result as they are known, Finish
// when it ends. Only the allow-listed argument field is kept; the others,
// a token among them, are in the digest alone, and the result is never
// stored.
func ExampleBuilder() {
	b := receipt.Builder{EmitterID: "agent-eu-1", EmitterVersion: "1.4.0",
		Redaction: receipt.Redaction{KeepArguments: []string{"query"}}}
	start := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

	r := b.Start(start)
	r.Requested = receipt.BoundName("docs_lookup")
	b.Arguments(r, json.RawMessage(`{"query":"mcp spec","token":"sk-live-123"}`))
	b.Result(r, []byte(`{"content":[{"type":"text","text":"…"}]}`))
	b.Finish(r, start.Add(143*time.Millisecond))

	fmt.Println("emitter:", r.GetEmitterId(), r.GetEmitterVersion())
	fmt.Println("id set:", r.GetReceiptId() != "")
	fmt.Println("redaction:", r.GetRedactionPolicyVersion())
	fmt.Println("kept:", r.GetKeptArguments())
	fmt.Println("arguments:", r.GetArgumentsDigest())
	fmt.Println("result digested:", strings.HasPrefix(r.GetResultDigest(), "sha256:"))
	fmt.Println("latency:", r.GetLatency().AsDuration())
	// Output:
	// emitter: agent-eu-1 1.4.0
	// id set: true
	// redaction: digest-only/v1
	// kept: map[query:mcp spec]
	// arguments: sha256:e2141a92b1bd5aa7a5187ce7836ebb2b364fdd5ff81a8e5a502b4d357d913a71
	// result digested: true
	// latency: 143ms
}

// The arguments digest is of the canonical JSON (RFC 8785): the same
// arguments in another key order or spacing digest the same.
func ExampleArgumentsDigest() {
	a := receipt.ArgumentsDigest(json.RawMessage(`{"query":"mcp spec","limit":5}`))
	b := receipt.ArgumentsDigest(json.RawMessage(`{ "limit": 5, "query": "mcp spec" }`))
	fmt.Println(a == b, strings.HasPrefix(a, "sha256:"))
	fmt.Println(receipt.ArgumentsDigest(nil) == receipt.ArgumentsDigest(json.RawMessage(`{}`)))
	// Output:
	// true true
	// true
}

// With a DigestKey the digests are keyed, so a low-entropy argument cannot
// be recovered from a receipt by guessing; the holder of the key checks a
// guess with KeyedDigest.
func ExampleRedaction() {
	key := []byte("organisation-digest-key")
	b := receipt.Builder{Redaction: receipt.Redaction{DigestKey: key}}
	r := b.Start(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	b.Arguments(r, json.RawMessage(`{"patient_id":"1234"}`))

	fmt.Println(r.GetRedactionPolicyVersion())
	fmt.Println(r.GetArgumentsDigest() == receipt.KeyedDigest(key, []byte(`{"patient_id":"1234"}`)))
	fmt.Println(r.GetArgumentsDigest() == receipt.KeyedDigest(key, []byte(`{"patient_id":"1235"}`)))
	// Output:
	// hmac-sha256/v1
	// true
	// false
}

// SafeError is the backstop for a receipt's error message: values that
// look like credentials are replaced.
func ExampleSafeError() {
	fmt.Println(receipt.SafeError("upstream: access not ready: Authorization: Bearer eyJhbGciOi.x.y"))
	fmt.Println(receipt.SafeError("token=abc123, retry later"))
	// Output:
	// upstream: access not ready: Authorization: Bearer [redacted]
	// token=[redacted], retry later
}

// BoundName keeps the names clients choose short in receipts, and two long
// names that differ apart.
func ExampleBoundName() {
	long := strings.Repeat("a", 600)
	a, b := receipt.BoundName(long), receipt.BoundName(long+"b")
	fmt.Println(receipt.BoundName("docs_lookup"))
	fmt.Println(len(a) <= receipt.MaxNameBytes, a != b, strings.Contains(a, "…sha256:"))
	// Output:
	// docs_lookup
	// true true true
}
