package console_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkPages renders each page, as HTML, with 100,000 receipts in the
// receipt store (1,000 batches of 100). The target is under 200 ms a
// page (docs/benchmarks.md).
func BenchmarkPages(b *testing.B) {
	e := newEnv(b, 100_000)
	h := e.handler(b, nil)
	for _, bc := range []struct{ name, path string }{
		{"registry", "/console/registry"},
		{"evidence", "/console/evidence"},
		{"receipts-newest-100", "/console/receipts"},
		{"receipts-newest-1000", "/console/receipts?limit=1000"},
		{"receipts-workflow", "/console/receipts?workflow=wf-3"},
		{"receipts-subject", "/console/receipts?subject=com.example/docs/docs.lookup"},
		{"receipts-time-range-scan", "/console/receipts?agent=host-1&since=2h&until=1m"},
		{"receipts-miss-full-scan", "/console/receipts?agent=nobody"},
		{"receipt-explained", "/console/receipts/r-99999"},
		{"probes", "/console/probes"},
		{"fleet", "/console/fleet"},
		{"receipts-json", "/console/receipts?format=json"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				req := httptest.NewRequest(http.MethodGet, bc.path, nil)
				req.RemoteAddr = "127.0.0.1:40000"
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("%s: %d %s", bc.path, rec.Code, rec.Body.String())
				}
			}
		})
	}
}
