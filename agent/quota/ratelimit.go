package quota

// Provider rate-limit hints: the RateLimit and RateLimit-Policy response
// fields of the IETF httpapi draft ("RateLimit Fields for HTTP"), read as
// hints about an upstream's remaining quota, never as reservations: a
// hint may lower a route's rank, it never refuses a call nor grants one.

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrRateLimitField reports a RateLimit or RateLimit-Policy field that does
// not parse; the hint is ignored.
var ErrRateLimitField = errors.New("quota: malformed RateLimit field")

// Bounds on what is parsed: longer fields or more items are refused.
const (
	maxFieldLen   = 4096
	maxFieldItems = 16
	// maxReset caps a hint's reset (a field cannot park a route for long),
	// maxWindow a policy's window.
	maxReset  = time.Hour
	maxWindow = 366 * 24 * time.Hour
)

// Hint is one quota policy's state as the upstream reported it.
type Hint struct {
	// Policy names the quota policy ("" for the draft's older, unnamed form).
	Policy string
	// Remaining quota units (r), and when the window resets (t, capped at
	// an hour); Known says the field gave remaining.
	Remaining int64
	Reset     time.Duration
	Known     bool
	// Quota and Window from RateLimit-Policy (q, w, the window capped at
	// 366 days; zero when absent), or limit in the older form.
	Quota  int64
	Window time.Duration
}

// ParseRateLimit parses the RateLimit field (and RateLimit-Policy, which
// may be "") of one response. Both the draft's current form
// (`"default";r=0;t=30`, `"default";q=100;w=60`) and its older dictionary
// form (`limit=100, remaining=0, reset=30`) are read. Unknown parameters
// are ignored. An empty RateLimit field gives no hints and no error.
func ParseRateLimit(ratelimit, policy string) ([]Hint, error) {
	if len(ratelimit) > maxFieldLen || len(policy) > maxFieldLen {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrRateLimitField, maxFieldLen)
	}
	if strings.TrimSpace(ratelimit) == "" {
		return nil, nil
	}
	items, err := parseList(ratelimit)
	if err != nil {
		return nil, err
	}
	if old, ok, err := parseDictionaryForm(items); ok || err != nil {
		return old, err
	}
	pols := map[string]item{}
	if strings.TrimSpace(policy) != "" {
		ps, err := parseList(policy)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			pols[p.name] = p
		}
	}
	var out []Hint
	for _, it := range items {
		h := Hint{Policy: it.name}
		r, hasR, err := it.int("r")
		if err != nil {
			return nil, err
		}
		t, _, err := it.int("t")
		if err != nil {
			return nil, err
		}
		h.Remaining, h.Known, h.Reset = r, hasR, seconds(t, maxReset)
		if p, ok := pols[it.name]; ok {
			if h.Quota, _, err = p.int("q"); err != nil {
				return nil, err
			}
			w, _, err := p.int("w")
			if err != nil {
				return nil, err
			}
			h.Window = seconds(w, maxWindow)
		}
		out = append(out, h)
	}
	return out, nil
}

// parseDictionaryForm reads the older `limit=, remaining=, reset=` form:
// ok when the members are those keys.
func parseDictionaryForm(items []item) ([]Hint, bool, error) {
	var h Hint
	for _, it := range items {
		if it.value == "" {
			return nil, false, nil
		}
		n, err := nonNegative(it.value)
		if err != nil {
			return nil, true, err
		}
		switch it.name {
		case "limit":
			h.Quota = n
		case "remaining":
			h.Remaining, h.Known = n, true
		case "reset":
			h.Reset = seconds(n, maxReset)
		default:
			return nil, false, nil
		}
	}
	return []Hint{h}, true, nil
}

func seconds(n int64, bound time.Duration) time.Duration {
	if n > int64(bound/time.Second) {
		return bound
	}
	return time.Duration(n) * time.Second
}

// item is one list member: a name (a string or token), an optional
// "=value" (the older form) and parameters.
type item struct {
	name, value string
	params      map[string]string
}

func (it item) int(key string) (int64, bool, error) {
	v, ok := it.params[key]
	if !ok {
		return 0, false, nil
	}
	n, err := nonNegative(v)
	return n, true, err
}

func nonNegative(v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || len(v) > 15 {
		return 0, fmt.Errorf("%w: %q is not a non-negative integer of at most 15 digits", ErrRateLimitField, v)
	}
	return n, nil
}

// parseList splits a structured-field list into items: members separated
// by commas, each a name then ";key=value" parameters; quoted strings may
// hold commas and semicolons.
func parseList(s string) ([]item, error) {
	members, err := split(s, ',')
	if err != nil {
		return nil, err
	}
	if len(members) > maxFieldItems {
		return nil, fmt.Errorf("%w: more than %d members", ErrRateLimitField, maxFieldItems)
	}
	out := make([]item, 0, len(members))
	for _, m := range members {
		parts, err := split(m, ';')
		if err != nil {
			return nil, err
		}
		it := item{params: map[string]string{}}
		name, value, _ := strings.Cut(strings.TrimSpace(parts[0]), "=")
		if it.name, err = bare(name); err != nil {
			return nil, err
		}
		it.value = strings.TrimSpace(value)
		for _, p := range parts[1:] {
			k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
			if !ok || k == "" {
				return nil, fmt.Errorf("%w: parameter %q has no value", ErrRateLimitField, p)
			}
			if it.params[k], err = bare(v); err != nil {
				return nil, err
			}
		}
		out = append(out, it)
	}
	return out, nil
}

// split splits s at sep outside double quotes.
func split(s string, sep byte) ([]string, error) {
	var out []string
	quoted, start := false, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && quoted:
			i++
		case c == '"':
			quoted = !quoted
		case c == sep && !quoted:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	if quoted {
		return nil, fmt.Errorf("%w: unterminated string", ErrRateLimitField)
	}
	return append(out, s[start:]), nil
}

// bare is a token, or a quoted string without its quotes.
func bare(v string) (string, error) {
	v = strings.TrimSpace(v)
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		return strings.ReplaceAll(strings.ReplaceAll(v[1:len(v)-1], `\"`, `"`), `\\`, `\`), nil
	}
	if v == "" || strings.ContainsAny(v, "\" \t") {
		return "", fmt.Errorf("%w: %q is neither a token nor a string", ErrRateLimitField, v)
	}
	return v, nil
}

// Hints keeps the latest rate-limit hints per key (an upstream endpoint).
// Safe for concurrent use; the zero value is not usable (NewHints).
type Hints struct {
	mu sync.Mutex
	m  map[string]time.Time // key -> when its exhausted hint ends
}

// maxHintKeys bounds the keys kept.
const maxHintKeys = 4096

// NewHints returns an empty set.
func NewHints() *Hints { return &Hints{m: map[string]time.Time{}} }

// Observe records the hints of one response for key at now: a policy with
// no remaining units marks key exhausted until its reset; any other
// response clears the mark.
func (h *Hints) Observe(key string, hints []Hint, now time.Time) {
	var until time.Time
	for _, x := range hints {
		if x.Known && x.Remaining == 0 && x.Reset > 0 {
			if end := now.Add(x.Reset); end.After(until) {
				until = end
			}
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if until.IsZero() {
		delete(h.m, key)
		return
	}
	if _, ok := h.m[key]; !ok && len(h.m) >= maxHintKeys {
		for k, t := range h.m {
			if !now.Before(t) {
				delete(h.m, k)
			}
		}
		if len(h.m) >= maxHintKeys {
			return
		}
	}
	h.m[key] = until
}

// Exhausted reports whether key's last hint said its quota is spent and
// the window has not reset by now.
func (h *Hints) Exhausted(key string, now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	until, ok := h.m[key]
	return ok && now.Before(until)
}
