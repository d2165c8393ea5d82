package pipeline

// Idempotency keys on the call path: checked, bound durably
// (agent/idempotency), allocated for state-changing calls to providers
// that declare key support, and carried where each route's Declaration
// says as well as in _meta.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mcpready/mcpready/agent/decide"
	"github.com/mcpready/mcpready/agent/idempotency"
	"github.com/mcpready/mcpready/agent/receipt"
	"github.com/mcpready/mcpready/agent/upstream"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// keyed is the idempotency key of one call ("" for none).
type keyed struct {
	key, ref string
}

// keys checks, allocates and binds the call's key; it returns a refusal
// (step, code, reason) when the call must not proceed. d's routes are
// narrowed to the bound route for a repeat.
func (p *Pipeline) keys(rec *mcpreadyv1.Receipt, d *decide.Decision, req *Request) (keyed, *decide.RefusalError) {
	key, allocated := req.IdempotencyKey, false
	if !req.HasKey {
		if p.opts.Keys == nil || !allocates(d.Routes) {
			return keyed{}, nil
		}
		key, allocated = idempotency.NewKey(), true
	}
	if err := idempotency.CheckKey(key); err != nil {
		return keyed{}, &decide.RefusalError{Step: readiness.StepSideEffect, Code: readiness.CodeIdempotencyKeyInvalid, Reason: err.Error()}
	}
	if p.opts.Keys == nil {
		rec.IdempotencyKeyRef = receipt.ArgumentsDigest(json.RawMessage(fmt.Sprintf("%q", key)))
		return keyed{key: key}, nil
	}
	st := p.opts.Keys
	scope := idempotency.Scope(req.Caller.Tenant, req.Caller.Principal, req.Tool)
	retention := d.Routes[0].KeyRetention
	if retention <= 0 {
		retention = idempotency.DefaultRetention
	}
	b, repeat, err := st.Bind(key, scope, req.Caller.Name, rec.ArgumentsDigest, retention)
	ir := &mcpreadyv1.IdempotencyRecord{KeyRef: st.Ref(key), Scope: scope, Retention: durationpb.New(retention),
		Allocated: allocated, Repeat: repeat, Carried: carried(d.Routes)}
	rec.Idempotency, rec.IdempotencyKeyRef = ir, ir.KeyRef
	switch {
	case errors.Is(err, idempotency.ErrKeyReused), errors.Is(err, idempotency.ErrKeyScope):
		return keyed{}, &decide.RefusalError{Step: readiness.StepSideEffect, Code: readiness.CodeIdempotencyKeyReused, Reason: err.Error()}
	case errors.Is(err, idempotency.ErrFull):
		return keyed{}, &decide.RefusalError{Step: readiness.StepSideEffect, Code: readiness.CodeIdempotencyStore, Reason: err.Error()}
	case err != nil:
		return keyed{}, &decide.RefusalError{Step: readiness.StepSideEffect, Code: readiness.CodeIdempotencyStore, Reason: "the idempotency binding could not be stored"}
	}
	if repeat && b.Entry != "" {
		for _, r := range d.Routes {
			if r.Entry == b.Entry {
				d.Routes = []decide.Route{r}
				return keyed{key: key, ref: ir.KeyRef}, nil
			}
		}
		return keyed{}, &decide.RefusalError{Step: readiness.StepSideEffect, Code: readiness.CodeIdempotencyRouteUnavailable,
			Reason: fmt.Sprintf("the key was first used on entry %s, which is no longer admitted for this call", b.Entry)}
	}
	return keyed{key: key, ref: ir.KeyRef}, nil
}

// allocates: some route changes state and its provider declares key
// support (every such route was admitted as retryable on that promise).
func allocates(routes []decide.Route) bool {
	for _, r := range routes {
		if r.KeySupport && !r.ReadOnly {
			return true
		}
	}
	return false
}

// carried lists where the key travels besides _meta, over routes.
func carried(routes []decide.Route) []string {
	var out []string
	add := func(s string) {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	for _, r := range routes {
		if r.KeyHeader != "" && idempotency.HeaderAllowed(r.KeyHeader) {
			add("header:" + r.KeyHeader)
		}
		if r.KeyArgument != "" {
			add("argument:" + r.KeyArgument)
		}
	}
	return out
}

// finish records the outcome of a keyed call in its binding.
func (p *Pipeline) finishKey(k keyed, entry string, out mcpreadyv1.OutcomeClass) {
	if k.ref == "" || p.opts.Keys == nil {
		return
	}
	// A binding that cannot record its outcome keeps its payload and
	// scope, which is what refusals need; the outcome is informational.
	_ = p.opts.Keys.Finish(k.ref, entry, strings.TrimPrefix(out.String(), "OUTCOME_CLASS_"))
}

// carry puts the key where route r's provider reads it: _meta always, the
// declared header, the declared argument (arguments that are not a JSON
// object are left as they are).
func (k keyed) carry(ctx context.Context, r decide.Route, meta map[string]any, args json.RawMessage) (context.Context, map[string]any, json.RawMessage) {
	if k.key == "" {
		return ctx, meta, args
	}
	if v, _ := meta[idempotency.MetaKey].(string); v != k.key {
		meta = maps.Clone(meta)
		if meta == nil {
			meta = map[string]any{}
		}
		meta[idempotency.MetaKey] = k.key
	}
	if r.KeyHeader != "" && idempotency.HeaderAllowed(r.KeyHeader) {
		ctx = upstream.WithHeader(ctx, r.KeyHeader, k.key)
	}
	if r.KeyArgument != "" {
		var obj map[string]json.RawMessage
		if len(args) == 0 {
			obj = map[string]json.RawMessage{}
		} else if json.Unmarshal(args, &obj) != nil || obj == nil {
			return ctx, meta, args
		}
		// A client argument whose name is the declared one but for case
		// (encoding/json's folding, strings.EqualFold's) goes: a provider
		// decoding with encoding/json reads the last of them, and the
		// sorted keys can put the client's after the agent's.
		for name := range obj {
			if name != r.KeyArgument && strings.EqualFold(name, r.KeyArgument) {
				delete(obj, name)
			}
		}
		v, _ := json.Marshal(k.key)
		obj[r.KeyArgument] = v
		if b, err := json.Marshal(obj); err == nil {
			args = b
		}
	}
	return ctx, meta, args
}
