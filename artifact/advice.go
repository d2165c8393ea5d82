package artifact

// Advisories: warnings about what an artifact means rather than which
// fields it sets (Unenforced covers those). An advised artifact parses,
// verifies and is stored; the advisory says that it binds less than it
// seems to. apply prints them, the writer logs them when it stores one.

import (
	"fmt"
	"slices"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// Advisory is one semantic warning about an artifact.
type Advisory struct {
	// Path is the spec field path it is about, e.g. "quota.partitionKeys[0]".
	Path string
	// Message says what the artifact fails to bind and what to set.
	Message string
}

func (a Advisory) String() string { return "spec." + a.Path + ": " + a.Message }

// advisers are the semantic checks, per kind.
var advisers = map[Kind]func(*Object) []Advisory{
	KindDeclaration: adviseDeclaration,
}

// Advise returns o's advisories, in field order. An object whose spec is
// nil (or of a kind without checks) has none.
func Advise(o *Object) []Advisory {
	if o == nil || o.Spec == nil || advisers[o.Kind] == nil {
		return nil
	}
	return advisers[o.Kind](o)
}

// quotaPartitionKeys are the Declaration quota partition keys the agent
// reads: "tenant" keeps its local budgets per tenant as well as per
// principal class and tool (agent/decide, agent/pipeline).
var quotaPartitionKeys = []string{"tenant"}

// adviseDeclaration: a quota partition key the agent does not read
// (anything but quotaPartitionKeys, matched exactly) does not split the
// local budgets, however the provider partitions its quota; a quota limit
// is counted only when it is positive and has a window.
func adviseDeclaration(o *Object) []Advisory {
	d, ok := o.Spec.(*mcpreadyv1.Declaration)
	if !ok {
		return nil
	}
	var out []Advisory
	switch l, w := d.GetQuota().GetLimit(), d.GetQuota().GetWindow(); {
	case l > 0 && w.AsDuration() <= 0:
		out = append(out, Advisory{Path: "quota.limit",
			Message: "a limit without a positive quota.window is not counted: agents keep the server's calls within it only per window"})
	case l < 0 || (l == 0 && w != nil):
		out = append(out, Advisory{Path: "quota.limit",
			Message: fmt.Sprintf("limit %d is not counted: a quota is a positive number of units per quota.window", l)})
	}
	for i, k := range d.GetQuota().GetPartitionKeys() {
		if !slices.Contains(quotaPartitionKeys, k) {
			out = append(out, Advisory{Path: fmt.Sprintf("quota.partitionKeys[%d]", i),
				Message: fmt.Sprintf("partition key %q is not read: local quota budgets are kept per principal and tool, and per tenant only for %q; the budget is not split by it", k, "tenant")})
		}
	}
	return out
}
