package analyze_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpready/mcpready/probe/analyze"
)

// export builds a probe export whose aggregates the test knows: 20 records;
// records 0-17 listed (18); of those, 0-11 called (12); record 18 called
// without a listing (13 calls); call latencies 100, 200, ... 1300 ms over
// the 13 successful calls; listing latencies 10*i; record 19 has blank
// list_ms, call_ms, website and probed_tool; streaks 3,3,5 on records 17-19;
// tools = i+1 except record 5 (blank) and record 7 (100).
func export() []byte {
	var b strings.Builder
	b.WriteString(analyze.Header + "\n")
	start := time.Date(2026, 9, 14, 9, 23, 21, 0, time.UTC)
	call := 0
	for i := range 20 {
		listed := i < 18
		called := i < 12 || i == 18
		listMs, callMs, website, tool, tools := "", "", "https://w.example", fmt.Sprintf("tool%d", i%7), fmt.Sprint(i+1)
		if listed {
			listMs = fmt.Sprint(10 * i)
		}
		if called {
			call++
			callMs = fmt.Sprint(100 * call)
		}
		switch i {
		case 5:
			tools = ""
		case 7:
			tools = "100"
		case 19:
			website, tool = "", ""
		}
		streak := 0
		switch i {
		case 17, 18:
			streak = 3
		case 19:
			streak = 5
		}
		fmt.Fprintf(&b, "srv%d,T%d,https://s%d.example/mcp,%s,%s,%v,%v,%s,%s,%s,%s,%d\n", i, i, i, website, tools, listed, called,
			listMs, callMs, tool, start.Add(time.Duration(i*5)*time.Second).Format(time.RFC3339), streak)
	}
	return []byte(b.String())
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestKnownAggregates(t *testing.T) {
	data := export()
	r, err := analyze.Analyze(data, analyze.Options{SHA256: digest(data)})
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, got, want any) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	check("records", r.Records, 20)
	check("unique", []int{r.UniqueServers, r.UniqueURLs}, []int{20, 20})
	check("listed", r.Listed, analyze.Count{N: 18, Denominator: 20, Percent: 90, Of: "records"})
	check("called", r.Called, analyze.Count{N: 13, Denominator: 20, Percent: 65, Of: "records"})
	check("called among listed", r.CalledAmongListed, analyze.Count{N: 12, Denominator: 18, Percent: 66.667, Of: "listed records"})
	check("listed not called", r.ListedNotCalled.N, 6)
	check("not called", r.NotCalled.N, 7)
	check("span", r.SpanSeconds, 95)
	check("first", r.First.Format(time.RFC3339), "2026-09-14T09:23:21Z")
	// listing 0,10,...,170 (18 values): median (80+90)/2
	check("listing", []float64{float64(r.Listing.N), r.Listing.MedianMs}, []float64{18, 85})
	// calls 100..1300 (13): median 700; nearest-rank P95 = ceil(12.35)=13th = 1300;
	// interpolated: pos 0.95*12 = 11.4 → 1200 + 0.4*100 = 1240.
	check("call", r.Call, analyze.Latency{N: 13, MedianMs: 700, P95NearestMs: 1300, P95LinearMs: 1240, MinMs: 100, MaxMs: 1300})
	check("over one second", r.CallsOverOneSec.N, 4)
	var bands []int
	for _, b := range r.Bands {
		bands = append(bands, b.Calls)
	}
	check("bands", bands, []int{2, 2, 5, 4, 0, 0, 0}) // 100,200 | 300,400 | 500-900 | 1000-1300
	check("streaks", []any{r.StreakAtLeast3.N, r.Streaks}, []any{3, map[int]int{3: 2, 5: 1}})
	// tools: 1..20 without 6, with 8 → 100: sum = 210 - 6 - 8 + 100
	check("tools", []any{r.ToolsSum, r.ToolsMax, r.ToolsAtMax, r.ToolsOne, r.ToolsAboveTen, r.Tools51To100},
		[]any{296, 100, 1, 1, 11, 1})
	check("tools median", r.ToolsMedian, 12.0) // 19 values 1,2,3,4,5,7,9,10,11,12,...,20,100: the 10th
	check("no probed tool", []int{r.NoProbedTool, r.NoProbedToolListed}, []int{1, 0})
	check("distinct probed", r.DistinctProbed, 7)
	check("blanks", r.Blanks, map[string]int{"server": 0, "title": 0, "url": 0, "website": 1, "tools": 1, "list_ok": 0, "call_ok": 0,
		"list_ms": 2, "call_ms": 7, "probed_tool": 1, "probed_at": 0, "streak": 0})
	if !strings.Contains(r.Label, "not availability") {
		t.Errorf("label %q", r.Label)
	}
	var svg bytes.Buffer
	if err := analyze.WriteSVG(&svg, r); err != nil || !strings.Contains(svg.String(), "<svg") || !strings.Contains(svg.String(), "not availability") {
		t.Errorf("svg: %v", err)
	}
}

func TestRefusals(t *testing.T) {
	data := export()
	if _, err := analyze.Analyze(data, analyze.Options{}); !errors.Is(err, analyze.ErrDigest) {
		t.Errorf("default digest (the frozen file's): %v", err)
	}
	bad := func(name string, b []byte, want error) {
		t.Helper()
		if _, err := analyze.Analyze(b, analyze.Options{SHA256: digest(b)}); !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
	}
	bad("header", bytes.Replace(data, []byte("call_ms"), []byte("callms"), 1), analyze.ErrHeader)
	bad("empty", nil, analyze.ErrHeader)
	bad("bool", bytes.Replace(data, []byte(",true,"), []byte(",yes,"), 1), analyze.ErrValue)
	bad("time", bytes.Replace(data, []byte("2026-09-14T09:23:21Z"), []byte("yesterday"), 1), analyze.ErrValue)
	bad("columns", append(bytes.Clone(data), []byte("a,b\n")...), analyze.ErrValue)
	bad("negative", bytes.Replace(data, []byte(",100,"), []byte(",-100,"), 1), analyze.ErrValue)

	lines := strings.SplitAfter(string(data), "\n")
	dup := []byte(string(data) + lines[1])
	r, err := analyze.Analyze(dup, analyze.Options{SHA256: digest(dup)})
	if err != nil || r.DuplicateRows != 1 || r.Records != 21 || r.UniqueServers != 20 {
		t.Fatalf("duplicate row: %v %+v", err, r)
	}
}

func FuzzAnalyze(f *testing.F) {
	f.Add(export())
	f.Add([]byte(analyze.Header + "\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := analyze.Analyze(b, analyze.Options{SHA256: digest(b)})
		if err != nil {
			if !errors.Is(err, analyze.ErrHeader) && !errors.Is(err, analyze.ErrValue) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if r.Listed.N > r.Records || r.Called.N > r.Records || r.CalledAmongListed.N > r.Listed.N {
			t.Fatalf("impossible counts %+v", r)
		}
	})
}
