package upstream

import (
	"context"
	"encoding/json"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// marshalCall is the reference encoding of a tools/call request.
func marshalCall(t testing.TB, id string, p *mcp.CallToolParams) any {
	t.Helper()
	b, err := json.Marshal(struct {
		JSONRPC string              `json:"jsonrpc"`
		ID      string              `json:"id"`
		Method  string              `json:"method"`
		Params  *mcp.CallToolParams `json:"params"`
	}{"2.0", id, "tools/call", p})
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// checkCallRequest: callRequest encodes the same JSON value as encoding/json.
func checkCallRequest(t testing.TB, p *mcp.CallToolParams) {
	t.Helper()
	want := marshalCall(t, "mcpready-7", p)
	b, err := callRequest("mcpready-7", p)
	if err != nil {
		t.Fatal(err)
	}
	var got any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("callRequest wrote invalid JSON %s: %v", b, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("callRequest = %s, want the value of %v", b, want)
	}
}

func TestCallRequest(t *testing.T) {
	for _, p := range []*mcp.CallToolParams{
		{Name: "echo", Arguments: json.RawMessage(`{"text":"benchmark"}`)},
		{Name: "echo", Arguments: json.RawMessage(" {\n \"a\" : [1, 2.50, {\"b\":null}] } ")},
		{Name: "echo", Arguments: map[string]any{}},
		{Name: `quo"te\back</script>&é`, Arguments: json.RawMessage(`{}`)},
		{Name: "echo", Arguments: json.RawMessage(`{"text":"<tag> & \u2028"}`)},
		{Name: "echo", Meta: mcp.Meta{"progressToken": "p1", "io.example/k": 3}, Arguments: json.RawMessage(`{"x":1}`)},
		{Name: "echo", Arguments: json.RawMessage(`{"x":1}`), RequestState: "s"},
		{Name: "echo", Arguments: json.RawMessage(nil)},
	} {
		checkCallRequest(t, p)
	}
	// Arguments that are not JSON are refused as encoding/json refuses them.
	if _, err := callRequest("mcpready-1", &mcp.CallToolParams{Name: "echo", Arguments: json.RawMessage(`{"x":`)}); err == nil {
		t.Fatal("callRequest accepted truncated arguments")
	}
}

func FuzzCallRequest(f *testing.F) {
	f.Add("echo", []byte(`{"text":"benchmark"}`))
	f.Add(`a"b\c`, []byte(` {"k" : [true,null,-0.0e1]}`))
	f.Add("échø", []byte(`{"s":"\ud83d\ude00"}`))
	f.Fuzz(func(t *testing.T, name string, args []byte) {
		p := &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(args)}
		_, refErr := json.Marshal(struct {
			P *mcp.CallToolParams `json:"params"`
		}{p})
		b, err := callRequest("mcpready-1", p)
		if (err != nil) != (refErr != nil) {
			t.Fatalf("callRequest error %v, encoding/json %v", err, refErr)
		}
		if err != nil {
			return
		}
		if !json.Valid(b) {
			t.Fatalf("invalid JSON %q", b)
		}
		checkCallRequest(t, p)
	})
}

// TestDecodeCallResultStructured: the structuredContent JSON comes back as
// received (what the output schema is checked against), nil when absent or
// null or when the go-sdk decoded the result.
func TestDecodeCallResultStructured(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"content":[{"type":"text","text":"x"}],"structuredContent":{"n":12345678901234567890,"s":"é"}}`, `{"n":12345678901234567890,"s":"é"}`},
		{`{"content":[{"type":"text","text":"x"}]}`, ""},
		{`{"content":[],"structuredContent":null}`, ""},
		{`{"content":[{"type":"image","data":"AA==","mimeType":"image/png"}],"structuredContent":{"a":1}}`, ""},
	} {
		res, _, got, err := decodeCallResult(json.RawMessage(tc.in))
		if err != nil || res == nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if string(got) != tc.want {
			t.Errorf("%s: structured %q, want %q", tc.in, got, tc.want)
		}
	}
	// The structuredContent returned is the result's own bytes, not a copy
	// (a large result is not copied once more).
	raw := json.RawMessage(`{"content":[],"structuredContent":{"a":"b"}}`)
	_, _, got, err := decodeCallResult(raw)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-4] = 'c'
	if string(got) != `{"a":"c"}` {
		t.Errorf("structured %s is a copy of the result's bytes", got)
	}
}

func TestIsID(t *testing.T) {
	for raw, want := range map[string]bool{
		`"mcpready-12"`: true, `"mcpready\u002d12"`: true, `"mcpready-1"`: false, `"mcpready-123"`: false,
		`12`: false, `"mcpready-12`: false, `null`: false, `"mcpready-12" `: true, `["mcpready-12"]`: false,
	} {
		if got := isID(json.RawMessage(raw), "mcpready-12"); got != want {
			t.Errorf("isID(%s) = %v, want %v", raw, got, want)
		}
	}
}

func TestMediaType(t *testing.T) {
	for ct, want := range map[string]string{
		"text/event-stream": "text/event-stream", "Text/Event-Stream; charset=utf-8": "text/event-stream",
		" application/json ;charset=utf-8": "application/json", "": "", "application/jsonx": "application/jsonx",
	} {
		if got := mediaType(ct); got != want {
			t.Errorf("mediaType(%q) = %q, want %q", ct, got, want)
		}
	}
}

// TestDecodeCallResultValue: structuredContent is decoded once when its
// numbers allow it, and then the result's value is exactly what
// encoding/json decodes (so the answer encodes the same) while the checked
// value keeps every number exact: a literal float64 would round (2^53+1,
// 0.1, 1e2, -0, 1.0) keeps the two apart.
func TestDecodeCallResultValue(t *testing.T) {
	for _, sc := range []string{
		`{"a":1,"b":[-2,{"c":9007199254740992}],"s":"x","t":true,"n":null}`,
		`{"a":9007199254740993}`, `{"a":0.1}`, `{"a":[1e2]}`, `{"a":-0}`, `{"a":1.0}`, `{"a":01}`,
		`"text"`, `7`, `[]`,
	} {
		res, value, _, err := decodeCallResult(json.RawMessage(`{"content":[],"structuredContent":` + sc + `}`))
		if strings.Contains(sc, "01") {
			if err == nil {
				t.Errorf("%s: decoded", sc)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", sc, err)
		}
		var want any
		if err := json.Unmarshal([]byte(sc), &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(res.StructuredContent, want) {
			t.Errorf("%s: result value %#v, want %#v", sc, res.StructuredContent, want)
		}
		exact, err := decodeExact(json.RawMessage(sc))
		if err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(value)
		b, _ := json.Marshal(exact)
		if string(a) != string(b) {
			t.Errorf("%s: checked value %s, want %s", sc, a, b)
		}
	}
}

// TestIsolate: the isolated context keeps none of the caller's values but
// its deadline and cancellation (with the caller's error), and contexts
// derived from it wait on that cancellation without a goroutine each.
func TestIsolate(t *testing.T) {
	type key struct{}
	parent, cancel := context.WithTimeout(context.WithValue(context.Background(), key{}, "front value"), time.Hour)
	ctx := isolate(parent)
	if ctx.Value(key{}) != nil {
		t.Fatal("a value of the caller leaked")
	}
	if dl, ok := ctx.Deadline(); !ok || dl != func() time.Time { d, _ := parent.Deadline(); return d }() {
		t.Fatalf("deadline %v %v", dl, ok)
	}
	before := runtime.NumGoroutine()
	var cancels []context.CancelFunc
	for range 50 {
		_, cc := context.WithCancel(ctx)
		cancels = append(cancels, cc)
	}
	if n := runtime.NumGoroutine(); n > before+5 {
		t.Fatalf("%d goroutines for 50 derived contexts", n-before)
	}
	child, childCancel := context.WithTimeout(ctx, time.Hour)
	defer childCancel()
	cancel()
	<-child.Done()
	if ctx.Err() != context.Canceled || child.Err() != context.Canceled {
		t.Fatalf("errors %v %v", ctx.Err(), child.Err())
	}
	for _, cc := range cancels {
		cc()
	}
	dctx, dcancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer dcancel()
	if err := isolate(dctx).Err(); err != context.DeadlineExceeded {
		t.Fatalf("past deadline: %v", err)
	}
}

// A result's text contents cost their decoded text (its string and the
// pointer that tells it was present) and, for several, their room; the
// usual single one is made with the result itself.
func TestDecodeCallResultAllocations(t *testing.T) {
	allocs := func(s string) float64 {
		raw := json.RawMessage(s)
		return testing.AllocsPerRun(100, func() {
			if _, _, _, err := decodeCallResult(raw); err != nil {
				t.Fatal(err)
			}
		})
	}
	const text = `{"type":"text","text":"x"}`
	none := allocs(`{"content":[]}`)
	if one := allocs(`{"content":[` + text + `]}`); one > none+2 {
		t.Errorf("one text content: %v allocations, none: %v", one, none)
	}
	// Several: room for the content and the texts, once each, and the
	// decoder's slice as it grows (twice).
	if three := allocs(`{"content":[` + text + `,` + text + `,` + text + `]}`); three > none+3*2+4 {
		t.Errorf("three text contents: %v allocations, none: %v", three, none)
	}
}

// decodeCallResult decodes every result the go-sdk decodes alike (and
// never panics): the same content, meta, isError and structuredContent.
func FuzzDecodeCallResult(f *testing.F) {
	for _, s := range []string{
		`{"content":[{"type":"text","text":"{\"text\":\"benchmark\"}"}],"structuredContent":{"text":"benchmark"}}`,
		`{"content":[{"type":"text","text":"a","_meta":{"k":1},"annotations":{"priority":0.5}},{"type":"text","text":"b"}],"isError":true}`,
		`{"content":[{"type":"text","text":"x"}],"content":[{"type":"image","data":"AA==","mimeType":"image/png"}]}`,
		`{"content":[{"type":"text"}]}`, `{"content":null,"_meta":{"a":"b"}}`, `{"content":[]}`, `{}`, `[]`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, _, _, err := decodeCallResult(json.RawMessage(in))
		if err != nil {
			return
		}
		var want mcp.CallToolResult
		if want.UnmarshalJSON([]byte(in)) != nil {
			return // the go-sdk's rules (encoding/json's) refuse more or less elsewhere
		}
		g, err := json.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		w, err := json.Marshal(&want)
		if err != nil {
			t.Fatal(err)
		}
		if string(g) != string(w) {
			t.Fatalf("decoded %s, the go-sdk %s", g, w)
		}
	})
}
