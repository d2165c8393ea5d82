package prober

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/internal/yamldoc"
	"github.com/mcpready/mcpready/probe"
)

// Canary is a call a round makes besides the registry's: one read-only tool
// called with the consumer's own arguments, which are in the Policy input
// class InputClass. Its Evidence is named probe/<server>/input-class/<class>
// and counts for calls in that class only (see probe.Options.InputClass).
type Canary struct {
	// Server and Tool name the tool; its RegistryEntry must classify it
	// READ_ONLY, or the canary is not called.
	Server string `json:"server"`
	Tool   string `json:"tool"`
	// InputClass is the class the arguments are in (a name the Policy's
	// inputClasses accept).
	InputClass string `json:"inputClass"`
	// Arguments are the call's arguments, a JSON object. They are sent to
	// the tool and never logged or reported.
	Arguments map[string]any `json:"arguments"`
}

// ErrCanary is a canary file that cannot be read as canaries.
var ErrCanary = errors.New("prober: bad canary file")

// ParseCanaries reads a canary file: a YAML or JSON list of Canary. Unknown
// fields, repeated keys, a missing server, tool, input class or arguments
// object, an input class no Policy could define, and two canaries for the
// same server and class (their Evidence would share one name) are errors
// wrapping ErrCanary; the arguments are never quoted in them.
func ParseCanaries(data []byte) ([]Canary, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	j, err := yamldoc.JSON(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCanary, err)
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	var cs []Canary
	if err := dec.Decode(&cs); err != nil {
		var te *json.UnmarshalTypeError
		switch { // a type error's own text would quote a number given as arguments
		case errors.As(err, &te) && te.Field != "":
			want := "a string"
			if te.Type.Kind() == reflect.Map {
				want = "an object"
			}
			return nil, fmt.Errorf("%w: %s is not %s", ErrCanary, te.Field, want)
		case errors.As(err, &te):
			return nil, fmt.Errorf("%w: not a list of canaries (server, tool, inputClass, arguments)", ErrCanary)
		}
		return nil, fmt.Errorf("%w: not a list of canaries (server, tool, inputClass, arguments): %w", ErrCanary, err)
	}
	seen := map[[2]string]bool{}
	for i, c := range cs {
		switch {
		case c.Server == "" || c.Tool == "":
			return nil, fmt.Errorf("%w: canary %d: server and tool are required", ErrCanary, i)
		case !artifact.ValidInputClass(c.InputClass):
			return nil, fmt.Errorf("%w: canary %d (%s %s): inputClass %q is not %s", ErrCanary, i, c.Server, c.Tool, c.InputClass, artifact.InputClassNames)
		case c.Arguments == nil:
			return nil, fmt.Errorf("%w: canary %d (%s %s): arguments must be a JSON object", ErrCanary, i, c.Server, c.Tool)
		case seen[[2]string{c.Server, c.InputClass}]:
			return nil, fmt.Errorf("%w: canary %d: a second canary for server %s and input class %s", ErrCanary, i, c.Server, c.InputClass)
		}
		seen[[2]string{c.Server, c.InputClass}] = true
	}
	return cs, nil
}

// withCanaries returns targets followed by one target per canary whose
// server has a target calling the canary's tool (that is, the registry
// classifies it READ_ONLY there): the same endpoint and registry answers,
// only that tool, the canary's arguments and input class. The canaries
// with no such target are returned apart, not probed.
func withCanaries(targets []probe.Target, canaries []Canary) (out []probe.Target, unmatched []Canary) {
	out = slices.Clone(targets)
	for _, c := range canaries {
		i := slices.IndexFunc(targets, func(t probe.Target) bool {
			return t.Options.Server == c.Server && slices.Contains(t.Options.ReadOnly, c.Tool)
		})
		if i < 0 {
			unmatched = append(unmatched, c)
			continue
		}
		t := targets[i]
		t.Options.ReadOnly = []string{c.Tool}
		t.Options.Arguments, t.Options.InputClass = c.Arguments, c.InputClass
		out = append(out, t)
	}
	return out, unmatched
}
