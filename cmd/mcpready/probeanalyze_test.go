package main

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strings"
	"testing"
)

// TestProbeAnalyzeRefusalsExplain: each refusal exits non-zero with a
// message that says what is wrong (the digests, the expected header, the
// line of a bad value), and the table carries the dates and denominators.
func TestProbeAnalyzeRefusalsExplain(t *testing.T) {
	dir := t.TempDir()
	good := analyzeHeader + "\n" + "a,A,https://a.example/mcp,,3,true,true,100,250,ping,2026-09-14T23:59:59Z,0\n" +
		"b,B,https://b.example/mcp,,4,true,false,120,,,2026-09-15T00:00:09Z,3\n"
	file := writeFile(t, dir, "p.csv", []byte(good))
	sum := sha256.Sum256([]byte(good))
	hexSum := hex.EncodeToString(sum[:])
	badValue := writeFile(t, dir, "v.csv", []byte(strings.Replace(good, ",4,true,false,", ",4,maybe,false,", 1)))
	badHeader := writeFile(t, dir, "h.csv", []byte(strings.Replace(good, "probed_tool", "tool", 1)))
	for _, c := range []struct {
		args []string
		code int
		says []string
	}{
		{[]string{file}, exitVerify, []string{"SHA-256", hexSum, "4e84191c8feda3276fb9493f9f0b34644a90b88c634ca0a99b381c0e0b2475f7"}},
		{[]string{file, "--sha256", strings.Repeat("0", 64)}, exitVerify, []string{"SHA-256", hexSum}},
		{[]string{filepath.Join(dir, "missing.csv")}, exitError, []string{"missing.csv", "no such file"}},
		{[]string{badHeader, "--sha256", hexOf(t, badHeader)}, exitError, []string{"header", analyzeHeader}},
		{[]string{badValue, "--sha256", hexOf(t, badValue)}, exitError, []string{"line 3", "list_ok", "maybe"}},
	} {
		code, out, errOut := runKeyCLI(t, append([]string{"probe", "analyze"}, c.args...)...)
		if code != c.code || out != "" {
			t.Errorf("%v: exit %d, stdout %q; want %d and nothing printed", c.args, code, out, c.code)
		}
		for _, s := range c.says {
			if !strings.Contains(errOut, s) {
				t.Errorf("%v: message %q does not say %q", c.args, errOut, s)
			}
		}
	}
	code, out, errOut := runKeyCLI(t, "probe", "analyze", file, "--sha256", strings.ToUpper(hexSum))
	if code != exitOK {
		t.Fatalf("upper-case digest: %d %s", code, errOut)
	}
	for _, s := range []string{"dates 2026-09-14, 2026-09-15", "(10 s;", "over 2 records: sum 7", "1 of 2 listed records", "not availability"} {
		if !strings.Contains(out, s) {
			t.Errorf("table lacks %q:\n%s", s, out)
		}
	}
}
