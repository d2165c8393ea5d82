package receipt

import (
	"encoding/json"
	"testing"
	"time"
)

// echoArgs and echoResult are the proxy-overhead benchmark's call
// (agent.BenchmarkProxyOverhead): tools/call "echo" and the result the
// upstream sends for it.
var (
	echoArgs   = json.RawMessage(`{"text":"benchmark"}`)
	echoResult = []byte(`{"content":[{"type":"text","text":"{\"echo\":\"benchmark\"}"}],"structuredContent":{"echo":"benchmark"}}`)
)

// BenchmarkBuilderCall is the receipt work of one echo call on the call
// path: Start, Arguments, Result and Finish, unkeyed (the benchmark
// agent's default) and keyed (ReceiptDigestKey).
func BenchmarkBuilderCall(b *testing.B) {
	for _, tc := range []struct {
		name string
		red  Redaction
	}{{"sha256", Redaction{}}, {"hmac", Redaction{DigestKey: []byte("0123456789abcdef0123456789abcdef")}}} {
		b.Run(tc.name, func(b *testing.B) {
			bl := Builder{EmitterID: "bench", EmitterVersion: "dev", Redaction: tc.red}
			now := time.Now()
			b.ReportAllocs()
			for b.Loop() {
				r := bl.Start(now)
				bl.Arguments(r, echoArgs)
				bl.Result(r, echoResult)
				bl.Finish(r, now.Add(time.Millisecond))
			}
		})
	}
}
