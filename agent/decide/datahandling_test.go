package decide

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// A Policy's data-handling rules hold providers to what their
// Declarations say about the data they keep: a retention longer than
// residency.maxRetention (or none stated, or none readable), or a
// sub-processor residency.deniedSubProcessors names, rejects the provider's
// tools at step 3 (data_handling). Before, Declaration dataHandling.retention
// and subProcessors were accepted and ignored, and no Policy could ask.
func TestDeclaredDataHandling(t *testing.T) {
	month := 30 * 24 * time.Hour
	cases := []struct {
		name     string
		max      time.Duration
		denied   []string
		handling *mcpreadyv1.DataHandling
		why      string // "" = admitted
	}{
		{"no rules", 0, nil, &mcpreadyv1.DataHandling{Retention: "P10Y", SubProcessors: []string{"Acme Analytics"}}, ""},
		{"within the cap", month, nil, &mcpreadyv1.DataHandling{Retention: "P7D"}, ""},
		{"at the cap", month, nil, &mcpreadyv1.DataHandling{Retention: "720h"}, ""},
		{"none kept", month, nil, &mcpreadyv1.DataHandling{Retention: "none"}, ""},
		{"over the cap", month, nil, &mcpreadyv1.DataHandling{Retention: "P90D"}, "retention P90D"},
		{"a month may be 31 days", month, nil, &mcpreadyv1.DataHandling{Retention: "P1M"}, "retention P1M"},
		{"not stated", month, nil, nil, "states no data retention"},
		{"unreadable", month, nil, &mcpreadyv1.DataHandling{Retention: "as long as needed"}, "cannot be read"},
		{"denied sub-processor", 0, []string{"acme analytics"}, &mcpreadyv1.DataHandling{SubProcessors: []string{"Acme Analytics"}}, "sub-processor \"Acme Analytics\""},
		{"other sub-processor", 0, []string{"acme analytics"}, &mcpreadyv1.DataHandling{SubProcessors: []string{"Globex"}}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := fixture()
			in.Policy.Residency = &mcpreadyv1.ResidencyRules{DeniedSubProcessors: tc.denied}
			if tc.max > 0 {
				in.Policy.Residency.MaxRetention = durationpb.New(tc.max)
			}
			in.Declarations["com.example/docs"] = &mcpreadyv1.Declaration{ServerName: "com.example/docs", DataHandling: tc.handling}
			req := baseReq()
			req.Tool = "com.example/docs/docs.lookup"
			d := snap(t, in).Decide(req, nil)
			var re *RefusalError
			switch {
			case tc.why == "":
				if d.Refusal != nil {
					t.Fatalf("refused: %v", d.Refusal)
				}
			case !errors.As(d.Refusal, &re) || re.Step != readiness.StepResidency || re.Code != readiness.CodeDataHandling || !strings.Contains(re.Reason, tc.why):
				t.Fatalf("got %v, want %s at step 3 naming %q", d.Refusal, readiness.CodeDataHandling, tc.why)
			}
		})
	}
}

func TestRetention(t *testing.T) {
	day := 24 * time.Hour
	for in, want := range map[string]time.Duration{
		"P30D": 30 * day, "p2w": 14 * day, "PT24H": day, "P1DT12H": 36 * day / 24, "PT90M": 90 * time.Minute,
		"P1M": 31 * day, "P1Y": 366 * day, "720h": 720 * time.Hour, "none": 0, "0": 0, " P1D ": day, "PT0.5S": 500 * time.Millisecond,
	} {
		if got, err := retention(in); err != nil || got != want {
			t.Errorf("retention(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "P", "PT", "P1H", "P-1D", "1 day", "P1D2", "PT1D", "P1.5D", "-5h", "P99999999999999999999D", "P1DT"} {
		if got, err := retention(in); err == nil {
			t.Errorf("retention(%q) = %v, want an error", in, got)
		}
	}
}

func FuzzRetention(f *testing.F) {
	for _, s := range []string{"P30D", "PT24H", "P1Y2M3W4DT5H6M7.5S", "720h", "none", "P99999999999D"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if d, err := retention(s); err == nil && d < 0 {
			t.Fatalf("retention(%q) = %v: negative", s, d)
		}
	})
}
