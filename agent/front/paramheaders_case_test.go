package front

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// The parameter headers are checked against the tools/call params as the
// go-sdk reads them, by exact key. The check read them with encoding/json,
// which also takes "ARGUMENTS" for "arguments" and "NAME" for "name" (the
// last of them): the header was compared with arguments (or a tool) other
// than the ones the call ran with. Before: each request below ran
// "routed" with region "us" under Mcp-Param-Region "eu", or with no header
// at all.
func TestParamHeadersReadParamsByExactKey(t *testing.T) {
	h, _ := newEraHarness(t)
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + statelessProtocol +
		`","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}}`
	for _, c := range []struct{ params, header string }{
		// The check read {"region":"eu"}; the call ran with "us".
		{`{"name":"routed","arguments":{"region":"us","n":1},"ARGUMENTS":{"region":"eu","n":1},` + meta + `}`, "eu"},
		{`{"name":"routed","arguments":{"region":"us","n":1},"argumentſ":{"region":"eu","n":1},` + meta + `}`, "eu"},
		// The check looked up "caps" (no parameter headers); "routed" ran
		// without its header.
		{`{"name":"routed","NAME":"caps","arguments":{"region":"us","n":1},` + meta + `}`, ""},
	} {
		body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":` + c.params + `}`
		req, _ := http.NewRequest(http.MethodPost, h.url+"/mcp/servers/era", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", statelessProtocol)
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "routed")
		req.Header.Set("Authorization", "Bearer "+devToken)
		if c.header != "" {
			req.Header.Set("Mcp-Param-Region", c.header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var msg struct {
			Error *struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		_ = json.Unmarshal(b, &msg)
		if resp.StatusCode != http.StatusBadRequest || msg.Error == nil || msg.Error.Code != codeHeaderMismatch {
			t.Errorf("params %s, Mcp-Param-Region %q: HTTP %d %s, want 400 with %d", c.params, c.header, resp.StatusCode, b, codeHeaderMismatch)
		}
	}
}

// An input schema's x-mcp-header annotations are read by exact key, as MCP
// clients read them: a tool listed with {"properties":{"region":{...,
// "x-mcp-header":"Region"}},"propertieſ":{"region":{"type":"string"}}}
// (LATIN SMALL LETTER LONG S, which encoding/json folds to "s", and which
// sorts after "properties") makes a client send Mcp-Param-Region, and the
// front must check it. Before: the front read region from "propertieſ",
// without the annotation, and checked nothing.
func TestHeaderBindingsByExactKey(t *testing.T) {
	var schema any
	if err := json.Unmarshal([]byte(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}},"propertieſ":{"region":{"type":"string"}}}`), &schema); err != nil {
		t.Fatal(err)
	}
	b := headerBindings(schema)
	if len(b) != 1 || b[0].header != "Region" || strings.Join(b[0].path, ".") != "region" {
		t.Fatalf("bindings %+v, want region in Mcp-Param-Region", b)
	}
}
