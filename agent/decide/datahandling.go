package decide

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// errRetention is a declared retention the agent cannot read.
var errRetention = errors.New("not a duration (ISO 8601 such as P30D or PT24H, Go such as 720h, or none)")

// retention reads a Declaration's dataHandling.retention: "none" or "0"
// (nothing kept), a Go duration ("720h"), or an ISO 8601 duration
// ("P30D", "P1Y6M", "P1DT12H", fractions on seconds only). Months count
// 31 days and years 366, the longest they can be, so that a retention
// found within a cap is within it on any calendar.
func retention(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	switch {
	case strings.EqualFold(s, "none") || s == "0":
		return 0, nil
	case s == "" || s[0] != 'P' && s[0] != 'p':
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return 0, errRetention
		}
		return d, nil
	}
	const day = 24 * time.Hour
	date := map[byte]time.Duration{'Y': 366 * day, 'M': 31 * day, 'W': 7 * day, 'D': day}
	clock := map[byte]time.Duration{'H': time.Hour, 'M': time.Minute, 'S': time.Second}
	units, rest := date, strings.ToUpper(s[1:])
	var total float64
	parts, inTime := 0, false
	for rest != "" {
		if rest[0] == 'T' {
			if inTime {
				return 0, errRetention
			}
			units, inTime, rest = clock, true, rest[1:]
			if rest == "" {
				return 0, errRetention
			}
			continue
		}
		i := 0
		for i < len(rest) && (rest[i] >= '0' && rest[i] <= '9' || rest[i] == '.') {
			i++
		}
		if i == 0 || i == len(rest) {
			return 0, errRetention
		}
		unit, ok := units[rest[i]]
		if !ok || strings.Contains(rest[:i], ".") && rest[i] != 'S' {
			return 0, errRetention
		}
		n, err := strconv.ParseFloat(rest[:i], 64)
		if err != nil {
			return 0, errRetention
		}
		total += n * float64(unit)
		delete(units, rest[i]) // each unit once
		parts, rest = parts+1, rest[i+1:]
	}
	if parts == 0 || total >= math.MaxInt64 {
		return 0, errRetention
	}
	return time.Duration(total), nil
}

// dataHandling holds a Declaration's dataHandling to the Policy's
// residency rules, reporting each breach through set.
func dataHandling(res *mcpreadyv1.ResidencyRules, dh *mcpreadyv1.DataHandling, set func(readiness.Step, readiness.Code, string, ...any)) {
	if rule := res.GetMaxRetention(); rule != nil {
		limit := rule.AsDuration()
		switch d, err := retention(dh.GetRetention()); {
		case dh.GetRetention() == "":
			set(readiness.StepResidency, readiness.CodeDataHandling, "the policy caps data retention at %v and the provider's Declaration states no data retention", limit)
		case err != nil:
			set(readiness.StepResidency, readiness.CodeDataHandling, "the provider's declared data retention %q cannot be read: %v", dh.GetRetention(), err)
		case d > limit:
			set(readiness.StepResidency, readiness.CodeDataHandling, "the provider declares data retention %s, longer than the policy's cap of %v", dh.GetRetention(), limit)
		}
	}
	for _, sp := range dh.GetSubProcessors() {
		for _, denied := range res.GetDeniedSubProcessors() {
			if strings.EqualFold(strings.TrimSpace(sp), strings.TrimSpace(denied)) {
				set(readiness.StepResidency, readiness.CodeDataHandling, "the provider declares sub-processor %q, which the policy denies", sp)
			}
		}
	}
}
