package console

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mcpready/mcpready/controlplane/receiptstore"
)

// Search limits.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
	maxParamLen  = 256
)

// ErrBadQuery is wrapped by every error of ParseSearch.
var ErrBadQuery = errors.New("console: bad receipt search")

// QueryError names the search parameter that was refused and why.
type QueryError struct {
	Param, Reason string
}

func (e *QueryError) Error() string {
	return fmt.Sprintf("%v: parameter %q: %s", ErrBadQuery, e.Param, e.Reason)
}

// Unwrap makes errors.Is(err, ErrBadQuery) hold.
func (e *QueryError) Unwrap() error { return ErrBadQuery }

// Search is a parsed receipt search: the receipt-store query and the form
// values to show back.
type Search struct {
	Query receiptstore.Query `json:"-"`
	// ID, Workflow, Subject, Server, Agent, Since and Until are the form's fields
	// as given (trimmed).
	ID       string `json:"id,omitempty"`
	Workflow string `json:"workflow,omitempty"`
	Subject  string `json:"subject,omitempty"`
	Server   string `json:"server,omitempty"`
	Agent    string `json:"agent,omitempty"`
	Since    string `json:"since,omitempty"`
	Until    string `json:"until,omitempty"`
	Limit    int    `json:"limit"`
}

// ParseSearch parses the receipt search parameters: id, workflow, subject
// ("SERVER/TOOL", split at the last "/" since server names hold slashes),
// server (a server name alone; not with subject), agent, since and until (RFC 3339, or
// a duration such as "90m" meaning that long before now), limit (1 to
// MaxLimit, default DefaultLimit). Unknown parameters other than format
// are refused, as are values longer than 256 bytes or with control
// characters. Errors are *QueryError.
func ParseSearch(v url.Values, now time.Time) (Search, error) {
	s := Search{Limit: DefaultLimit}
	for k, vs := range v {
		switch k {
		case "id", "workflow", "subject", "server", "agent", "since", "until", "limit", "format":
		default:
			return Search{}, &QueryError{Param: k, Reason: "unknown parameter (want id, workflow, subject, server, agent, since, until, limit)"}
		}
		if len(vs) > 1 {
			return Search{}, &QueryError{Param: k, Reason: "given more than once"}
		}
		if len(vs[0]) > maxParamLen {
			return Search{}, &QueryError{Param: k, Reason: fmt.Sprintf("longer than %d bytes", maxParamLen)}
		}
		if strings.ContainsFunc(vs[0], func(r rune) bool { return r < 0x20 || r == 0x7f || r == 0xfffd }) {
			return Search{}, &QueryError{Param: k, Reason: "contains a control character or invalid UTF-8"}
		}
	}
	get := func(k string) string { return strings.TrimSpace(v.Get(k)) }
	s.ID, s.Workflow, s.Subject, s.Server, s.Agent, s.Since, s.Until = get("id"), get("workflow"), get("subject"), get("server"), get("agent"), get("since"), get("until")
	q := receiptstore.Query{ReceiptID: s.ID, WorkflowID: s.Workflow, ServerName: s.Server, AgentID: s.Agent}
	if s.Subject != "" {
		i := strings.LastIndexByte(s.Subject, '/')
		if i <= 0 || i == len(s.Subject)-1 {
			return Search{}, &QueryError{Param: "subject", Reason: "want SERVER/TOOL"}
		}
		if s.Server != "" {
			return Search{}, &QueryError{Param: "server", Reason: "give subject or server, not both"}
		}
		q.ServerName, q.ToolName = s.Subject[:i], s.Subject[i+1:]
	}
	var err error
	if q.Since, err = parseTime("since", s.Since, now); err != nil {
		return Search{}, err
	}
	if q.Until, err = parseTime("until", s.Until, now); err != nil {
		return Search{}, err
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Until.After(q.Since) {
		return Search{}, &QueryError{Param: "until", Reason: "not after since"}
	}
	if l := get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > MaxLimit {
			return Search{}, &QueryError{Param: "limit", Reason: fmt.Sprintf("want a whole number from 1 to %d", MaxLimit)}
		}
		s.Limit = n
	}
	q.Limit = s.Limit
	s.Query = q
	return s, nil
}

func parseTime(param, s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return time.Time{}, &QueryError{Param: param, Reason: "want an RFC 3339 time or a positive duration before now such as 90m"}
	}
	return now.Add(-d), nil
}
