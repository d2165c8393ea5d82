// Package analyze reads a probe export in the readiness paper's 12-column
// format (server,title,url,website,tools,list_ok,call_ok,list_ms,call_ms,
// probed_tool,probed_at,streak) and reproduces the figures the paper's
// Appendix C lists as reproducible from its frozen file: counts and rates
// with their denominators, unique names and URLs, the time span, medians,
// nearest-rank and interpolated P95, the latency bands, streaks, the tools
// column, blanks per column and distinct probed tools.
//
// It refuses a file whose SHA-256 is not the expected one or whose header
// differs, before calculating anything. It labels the result as what it is
// (a keyless one-night completion funnel from one vantage point, on the
// legacy initialize path) and must never present it as availability.
package analyze

import (
	"bytes"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// FrozenSHA256 is the digest of the paper's frozen file,
// mcp-probe-2026-09-14.csv.
const FrozenSHA256 = "4e84191c8feda3276fb9493f9f0b34644a90b88c634ca0a99b381c0e0b2475f7"

// Header is the only header accepted.
const Header = "server,title,url,website,tools,list_ok,call_ok,list_ms,call_ms,probed_tool,probed_at,streak"

// Label says what the figures are, and what they are not.
const Label = "a keyless one-night probe completion funnel from one vantage point, on the legacy initialize path: not availability, not a service level"

// Errors.
var (
	ErrDigest = errors.New("the file's SHA-256 is not the expected digest")
	ErrHeader = errors.New("the header is not the 12-column probe export header")
	ErrValue  = errors.New("bad value")
)

// Count is a count with its denominator.
type Count struct {
	N           int     `json:"n"`
	Denominator int     `json:"denominator"`
	Percent     float64 `json:"percent"`
	Of          string  `json:"of"`
}

func count(n, d int, of string) Count {
	c := Count{N: n, Denominator: d, Of: of}
	if d > 0 {
		c.Percent = math.Round(float64(n)*100000/float64(d)) / 1000
	}
	return c
}

// Latency summarises one latency column over its successful observations.
type Latency struct {
	N            int     `json:"n"`
	MedianMs     float64 `json:"medianMs"`
	P95NearestMs float64 `json:"p95NearestRankMs"`
	P95LinearMs  float64 `json:"p95InterpolatedMs"`
	MinMs        float64 `json:"minMs"`
	MaxMs        float64 `json:"maxMs"`
}

// Band is one latency band of the successful calls.
type Band struct {
	Label string `json:"label"`
	Calls int    `json:"calls"`
}

// Result is every figure, each with its denominator. Dates are the distinct
// UTC dates of probed_at, in order; the Tools* figures are over the
// ToolsRecords records with a tools value.
type Result struct {
	Label              string         `json:"label"`
	SHA256             string         `json:"sha256"`
	Records            int            `json:"records"`
	DuplicateRows      int            `json:"duplicateRows"`
	UniqueServers      int            `json:"uniqueServers"`
	UniqueURLs         int            `json:"uniqueUrls"`
	Listed             Count          `json:"listed"`
	Called             Count          `json:"called"`
	CalledAmongListed  Count          `json:"calledAmongListed"`
	ListedNotCalled    Count          `json:"listedNotCalled"`
	NotCalled          Count          `json:"notCalled"`
	Dates              []string       `json:"dates"`
	First              time.Time      `json:"first"`
	Last               time.Time      `json:"last"`
	SpanSeconds        int            `json:"spanSeconds"`
	Listing            Latency        `json:"listing"`
	Call               Latency        `json:"call"`
	CallsOverOneSec    Count          `json:"callsAtOrAboveOneSecond"`
	Bands              []Band         `json:"bands"`
	StreakAtLeast3     Count          `json:"streakAtLeastThree"`
	Streaks            map[int]int    `json:"streaksAtLeastThreeByValue"`
	ToolsRecords       int            `json:"toolsRecords"`
	ToolsSum           int            `json:"toolsSum"`
	ToolsMax           int            `json:"toolsMax"`
	ToolsAtMax         int            `json:"toolsAtMax"`
	ToolsMedian        float64        `json:"toolsMedian"`
	ToolsOne           int            `json:"toolsOne"`
	ToolsAboveTen      int            `json:"toolsAboveTen"`
	Tools51To100       int            `json:"tools51To100"`
	NoProbedTool       int            `json:"noProbedTool"`
	NoProbedToolListed int            `json:"noProbedToolListed"`
	DistinctProbed     int            `json:"distinctProbedTools"`
	Blanks             map[string]int `json:"blanksByColumn"`
}

// Options configure Analyze. The zero value expects the frozen file.
type Options struct {
	// SHA256 is the expected digest (hex). Zero: FrozenSHA256.
	SHA256 string
}

type row struct {
	server, url, tool          string
	tools, streak              int
	listOK, callOK             bool
	listMs, callMs             float64
	hasTools, hasList, hasCall bool
	at                         time.Time
}

var columns = strings.Split(Header, ",")

// Analyze checks data's digest and header, then computes every figure.
func Analyze(data []byte, o Options) (*Result, error) {
	want := strings.ToLower(strings.TrimSpace(o.SHA256))
	if want == "" {
		want = FrozenSHA256
	}
	sum := sha256.Sum256(data)
	got := hex.EncodeToString(sum[:])
	if got != want {
		return nil, fmt.Errorf("%w: sha256 %s, want %s", ErrDigest, got, want)
	}
	rows, blanks, dups, err := parse(data)
	if err != nil {
		return nil, err
	}
	r := &Result{Label: Label, SHA256: got, Records: len(rows), DuplicateRows: dups, Blanks: blanks, Streaks: map[int]int{}}
	fill(r, rows)
	return r, nil
}

func parse(data []byte) ([]row, map[string]int, int, error) {
	cr := csv.NewReader(bytes.NewReader(data))
	cr.FieldsPerRecord = len(columns)
	head, err := cr.Read()
	if err != nil || strings.Join(head, ",") != Header {
		return nil, nil, 0, fmt.Errorf("%w (want %q)", ErrHeader, Header)
	}
	blanks := map[string]int{}
	for _, c := range columns {
		blanks[c] = 0
	}
	seen := map[string]bool{}
	dups := 0
	var rows []row
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, 0, fmt.Errorf("%w: line %d: %w", ErrValue, line, err)
		}
		key := strings.Join(rec, "\x00")
		if seen[key] {
			dups++
		}
		seen[key] = true
		for i, v := range rec {
			if strings.TrimSpace(v) == "" {
				blanks[columns[i]]++
			}
		}
		x, err := parseRow(rec)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("%w: line %d: %w", ErrValue, line, err)
		}
		rows = append(rows, x)
	}
	return rows, blanks, dups, nil
}

func parseRow(rec []string) (row, error) {
	x := row{server: rec[0], url: rec[2], tool: strings.TrimSpace(rec[9])}
	var err error
	if x.tools, x.hasTools, err = intCell(rec[4], "tools"); err != nil {
		return x, err
	}
	if x.listOK, err = boolCell(rec[5], "list_ok"); err != nil {
		return x, err
	}
	if x.callOK, err = boolCell(rec[6], "call_ok"); err != nil {
		return x, err
	}
	if x.listMs, x.hasList, err = msCell(rec[7], "list_ms"); err != nil {
		return x, err
	}
	if x.callMs, x.hasCall, err = msCell(rec[8], "call_ms"); err != nil {
		return x, err
	}
	if x.at, err = time.Parse(time.RFC3339, strings.TrimSpace(rec[10])); err != nil {
		return x, fmt.Errorf("probed_at %q is not an RFC 3339 time", rec[10])
	}
	if x.streak, _, err = intCell(rec[11], "streak"); err != nil {
		return x, err
	}
	return x, nil
}

func intCell(s, col string) (int, bool, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, false, fmt.Errorf("%s %q is not a non-negative integer", col, s)
	}
	return n, true, nil
}

func msCell(s, col string) (float64, bool, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false, fmt.Errorf("%s %q is not a non-negative number", col, s)
	}
	return f, true, nil
}

func boolCell(s, col string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("%s %q is not true or false", col, s)
}

func fill(r *Result, rows []row) {
	servers, urls, probed, dates := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	var listed, called, calledListed, listedNotCalled int
	var listMs, callMs, tools []float64
	for i, x := range rows {
		servers[x.server], urls[x.url] = true, true
		if x.listOK {
			listed++
			if x.hasList {
				listMs = append(listMs, x.listMs)
			}
		}
		if x.callOK {
			called++
			if x.listOK {
				calledListed++
			}
			if x.hasCall {
				callMs = append(callMs, x.callMs)
			}
		}
		if x.listOK && !x.callOK {
			listedNotCalled++
		}
		dates[x.at.UTC().Format(time.DateOnly)] = true
		if i == 0 || x.at.Before(r.First) {
			r.First = x.at
		}
		if i == 0 || x.at.After(r.Last) {
			r.Last = x.at
		}
		if x.streak >= 3 {
			r.Streaks[x.streak]++
		}
		if x.hasTools {
			tools = append(tools, float64(x.tools))
			r.ToolsSum += x.tools
			r.ToolsMax = max(r.ToolsMax, x.tools)
			switch {
			case x.tools == 1:
				r.ToolsOne++
			case x.tools > 50 && x.tools <= 100:
				r.Tools51To100++
			}
			if x.tools > 10 {
				r.ToolsAboveTen++
			}
		}
		if x.tool == "" {
			r.NoProbedTool++
			if x.listOK {
				r.NoProbedToolListed++
			}
		} else {
			probed[x.tool] = true
		}
	}
	n := len(rows)
	r.UniqueServers, r.UniqueURLs, r.DistinctProbed = len(servers), len(urls), len(probed)
	r.Listed = count(listed, n, "records")
	r.Called = count(called, n, "records")
	r.CalledAmongListed = count(calledListed, listed, "listed records")
	r.ListedNotCalled = count(listedNotCalled, listed, "listed records")
	r.NotCalled = count(n-called, n, "records")
	r.SpanSeconds = int(r.Last.Sub(r.First) / time.Second)
	r.Dates = slices.Sorted(maps.Keys(dates))
	r.ToolsRecords = len(tools)
	r.Listing = latency(listMs)
	r.Call = latency(callMs)
	r.Bands = Bands(callMs)
	over := 0
	for _, ms := range callMs {
		if ms >= 1000 {
			over++
		}
	}
	r.CallsOverOneSec = count(over, len(callMs), "successful calls")
	atLeast3 := 0
	for _, c := range r.Streaks {
		atLeast3 += c
	}
	r.StreakAtLeast3 = count(atLeast3, n, "records")
	for _, t := range tools {
		if int(t) == r.ToolsMax {
			r.ToolsAtMax++
		}
	}
	slices.Sort(tools)
	r.ToolsMedian = median(tools)
}

// Bands counts latencies (milliseconds) into the paper's seven bands, from
// "under 250 ms" to "10 s or more"; a bound belongs to the band above it.
func Bands(ms []float64) []Band {
	bounds := []float64{250, 500, 1000, 2000, 5000, 10000}
	labels := []string{"under 250 ms", "250 to 499 ms", "500 to 999 ms", "1.0 to 1.9 s", "2.0 to 4.9 s", "5.0 to 9.9 s", "10 s or more"}
	bands := make([]Band, len(labels))
	for i := range labels {
		bands[i].Label = labels[i]
	}
	for _, m := range ms {
		b, _ := slices.BinarySearch(bounds, m)
		if b < len(bounds) && bounds[b] == m {
			b++
		}
		bands[b].Calls++
	}
	return bands
}

func latency(ms []float64) Latency {
	if len(ms) == 0 {
		return Latency{}
	}
	slices.Sort(ms)
	n := len(ms)
	rank := int(math.Ceil(0.95 * float64(n))) // nearest rank, 1-based
	pos := 0.95 * float64(n-1)                // N-1 convention
	lo := int(math.Floor(pos))
	hi := min(lo+1, n-1)
	return Latency{N: n, MedianMs: median(ms), P95NearestMs: ms[rank-1], P95LinearMs: math.Round((ms[lo]+(ms[hi]-ms[lo])*(pos-float64(lo)))*1000) / 1000, // to the microsecond
		MinMs: ms[0], MaxMs: ms[n-1]}
}

// median of sorted values (the mean of the two middle ones for an even
// count).
func median(s []float64) float64 {
	n := len(s)
	switch {
	case n == 0:
		return 0
	case n%2 == 1:
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
