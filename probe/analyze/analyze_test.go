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
	check("last", r.Last.Format(time.RFC3339), "2026-09-14T09:24:56Z")
	check("dates", r.Dates, []string{"2026-09-14"})
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
	check("tools records", r.ToolsRecords, 19)
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

// edgeExport builds 33 records aimed at the edges of each figure:
//   - rows 0-27 listed and called, call_ms at both edges of every band
//     (249 | 250 499 | 500 700 999 | 1000 1500 1500 1999 | 2000 3000x3 4999 |
//     5000 6000x4 9999 | 10000 11000 ... 15000 17888: 1..7 calls per band),
//     in no sorted order, list_ms 10..280;
//   - rows 28-30 listed, call failed but carrying call_ms 5 (must not count
//     as a successful call), list_ms 290, 300, 310;
//   - rows 31-32 not listed, carrying list_ms 1 and blank (must not count
//     as a successful listing), call_ms blank;
//   - rows 31 and 32 reuse row 0's URL and row 32 reuses its name;
//   - probed_at crosses midnight: row k at 23:59:30Z + 3k s, except row 5
//     (the latest, 00:01:10Z) and row 12 (the earliest, 23:59:25Z);
//   - tools 100 100 100 51 50 11 10 1 1 0 blank, then 5 for rows 11-32;
//   - streaks: 13 on rows 0-1, 1 on row 2, 2 on row 3, 4 on row 29, 3 on
//     rows 30-32;
//   - website blank on rows 0-2; probed_tool blank on row 28 (listed) and
//     row 31 (not listed), else t<k%4>.
func edgeExport() []byte {
	calls := []int{17888, 249, 5000, 250, 10000, 499, 500, 999, 700, 1000, 1999, 1500, 1500, 2000, 4999,
		3000, 3000, 3000, 6000, 6000, 6000, 6000, 9999, 11000, 12000, 13000, 14000, 15000}
	tools := []string{"100", "100", "100", "51", "50", "11", "10", "1", "1", "0", ""}
	streaks := map[int]int{0: 13, 1: 13, 2: 1, 3: 2, 29: 4, 30: 3, 31: 3, 32: 3}
	base := time.Date(2026, 9, 14, 23, 59, 30, 0, time.UTC)
	var b strings.Builder
	b.WriteString(analyze.Header + "\n")
	for k := range 33 {
		server, url, website, tool, tl := fmt.Sprintf("srv%d", k), fmt.Sprintf("https://s%d.example/mcp", k), "https://w.example", fmt.Sprintf("t%d", k%4), "5"
		listed, called, listMs, callMs := true, false, "", ""
		switch {
		case k < 28:
			called, listMs, callMs = true, fmt.Sprint(10*(k+1)), fmt.Sprint(calls[k])
		case k < 31:
			listMs, callMs = fmt.Sprint(290+10*(k-28)), "5"
		default:
			listed = false
			if k == 31 {
				listMs = "1"
			}
			url = "https://s0.example/mcp"
		}
		if k == 32 {
			server = "srv0"
		}
		if k < len(tools) {
			tl = tools[k]
		}
		if k < 3 {
			website = ""
		}
		if k == 28 || k == 31 {
			tool = ""
		}
		at := base.Add(time.Duration(3*k) * time.Second)
		switch k {
		case 5:
			at = base.Add(100 * time.Second)
		case 12:
			at = base.Add(-5 * time.Second)
		}
		fmt.Fprintf(&b, "%s,T,%s,%s,%s,%v,%v,%s,%s,%s,%s,%d\n", server, url, website, tl, listed, called, listMs, callMs, tool,
			at.Format(time.RFC3339), streaks[k])
	}
	return []byte(b.String())
}

func TestEdgeAggregates(t *testing.T) {
	data := edgeExport()
	r, err := analyze.Analyze(data, analyze.Options{SHA256: digest(data)})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"records", r.Records, 33},
		{"unique names", r.UniqueServers, 32},
		{"unique URLs", r.UniqueURLs, 31},
		{"duplicate rows", r.DuplicateRows, 0},
		{"listed", r.Listed, analyze.Count{N: 31, Denominator: 33, Percent: 93.939, Of: "records"}},
		{"called", r.Called, analyze.Count{N: 28, Denominator: 33, Percent: 84.848, Of: "records"}},
		{"called among listed", r.CalledAmongListed, analyze.Count{N: 28, Denominator: 31, Percent: 90.323, Of: "listed records"}},
		{"listed not called", r.ListedNotCalled, analyze.Count{N: 3, Denominator: 31, Percent: 9.677, Of: "listed records"}},
		{"not called", r.NotCalled, analyze.Count{N: 5, Denominator: 33, Percent: 15.152, Of: "records"}},
		{"dates", r.Dates, []string{"2026-09-14", "2026-09-15"}},
		{"first", r.First.Format(time.RFC3339), "2026-09-14T23:59:25Z"},
		{"last", r.Last.Format(time.RFC3339), "2026-09-15T00:01:10Z"},
		{"span", r.SpanSeconds, 105},
		// 31 listings 10..310 (the failures' 1 excluded): the 16th
		{"listing", []float64{float64(r.Listing.N), r.Listing.MedianMs}, []float64{31, 160}},
		// 28 calls (the failures' 5 ms excluded): median (3000+4999)/2;
		// nearest rank ceil(26.6) = 27th = 15000; interpolated at
		// 0.95*27 = 25.65: 14000 + 0.65*1000.
		{"call", r.Call, analyze.Latency{N: 28, MedianMs: 3999.5, P95NearestMs: 15000, P95LinearMs: 14650, MinMs: 249, MaxMs: 17888}},
		{"at or above one second", r.CallsOverOneSec, analyze.Count{N: 22, Denominator: 28, Percent: 78.571, Of: "successful calls"}},
		{"bands", r.Bands, []analyze.Band{{"under 250 ms", 1}, {"250 to 499 ms", 2}, {"500 to 999 ms", 3}, {"1.0 to 1.9 s", 4},
			{"2.0 to 4.9 s", 5}, {"5.0 to 9.9 s", 6}, {"10 s or more", 7}}},
		{"streak >= 3", r.StreakAtLeast3, analyze.Count{N: 6, Denominator: 33, Percent: 18.182, Of: "records"}},
		{"streaks by value", r.Streaks, map[int]int{3: 3, 4: 1, 13: 2}},
		// 32 values: 0 1 1 5x22 10 11 50 51 100 100 100
		{"tools", []int{r.ToolsRecords, r.ToolsSum, r.ToolsMax, r.ToolsAtMax, r.ToolsOne, r.ToolsAboveTen, r.Tools51To100}, []int{32, 534, 100, 3, 2, 6, 4}},
		{"tools median", r.ToolsMedian, 5.0},
		{"no probed tool", []int{r.NoProbedTool, r.NoProbedToolListed}, []int{2, 1}},
		{"distinct probed tools", r.DistinctProbed, 4},
		{"blanks", r.Blanks, map[string]int{"server": 0, "title": 0, "url": 0, "website": 3, "tools": 1, "list_ok": 0, "call_ok": 0,
			"list_ms": 1, "call_ms": 2, "probed_tool": 2, "probed_at": 0, "streak": 0}},
	} {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
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
