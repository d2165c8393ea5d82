package front

import (
	"context"
	"iter"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// The attacks on Policy.principals[].methods, through the transparent view
// of a real go-sdk upstream. Each failed before method rules existed: a
// principal admitted to one tool of a server could read, list, get,
// complete and subscribe to everything on it.

// methodsPolicy is testPolicy with dev's method rules replaced by rules
// (dev keeps its tools).
func methodsPolicy(rules ...*mcpreadyv1.MethodRule) *mcpreadyv1.Policy {
	p := testPolicy()
	p.Principals[0].Methods = rules
	return p
}

// files adds public and secret resources, templates and a second prompt
// to the harness's upstream; reads counts what reached the upstream by URI
// or prompt name.
func files(h *harness) *seen {
	reads := &seen{}
	for _, uri := range []string{"file:///public/a", "file:///secret/x"} {
		h.up.Server.AddResource(&mcp.Resource{URI: uri, Name: uri, MIMEType: "text/plain"},
			func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				reads.add(req.Params.URI)
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "contents of " + req.Params.URI}}}, nil
			})
	}
	for _, tpl := range []string{"file:///public/{name}", "file:///{+path}"} {
		h.up.Server.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: tpl, Name: tpl},
			func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return nil, mcp.ResourceNotFoundError("x")
			})
	}
	h.up.Server.AddPrompt(&mcp.Prompt{Name: "secret"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		reads.add("prompt secret")
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "the secret prompt"}}}}, nil
	})
	return reads
}

// seen records what reached the upstream.
type seen struct {
	mu sync.Mutex
	m  []string
}

func (s *seen) add(x string) { s.mu.Lock(); s.m = append(s.m, x); s.mu.Unlock() }

func (s *seen) list() []string { s.mu.Lock(); defer s.mu.Unlock(); return slices.Clone(s.m) }

// listed is what a listing (every page) shows, by name.
func listed[T any](t *testing.T, items iter.Seq2[T, error], name func(T) string) []string {
	t.Helper()
	var out []string
	for x, err := range items {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, name(x))
	}
	return out
}

// wantRefused fails unless err is a policy refusal naming code.
func wantRefused(t *testing.T, what string, err error, code readiness.Code) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), string(code)) {
		t.Fatalf("%s: %v, want refused with %s", what, err, code)
	}
}

// wantRefusedReceipt fails unless requested has exactly one receipt,
// REFUSED with code.
func wantRefusedReceipt(t *testing.T, h *harness, requested string, code readiness.Code) {
	t.Helper()
	var got []*mcpreadyv1.Receipt
	for _, r := range h.receiptsFor(requested) {
		if r.GetRequested() == requested {
			got = append(got, r)
		}
	}
	if len(got) != 1 || got[0].GetOutcome() != mcpreadyv1.OutcomeClass_OUTCOME_CLASS_REFUSED || !strings.HasPrefix(got[0].GetErrorMessage(), string(code)+": ") {
		t.Fatalf("receipts of %q: %v, want one REFUSED with %s", requested, got, code)
	}
}

// A principal admitted to tools of a server but with no method rule gets
// none of its resources, prompts, completion or subscriptions (default
// deny), each refused with method_not_permitted and receipted, and nothing
// reaches the upstream; initialize (housekeeping) and its tools still work.
func TestMethodsDefaultDeny(t *testing.T) {
	h := newHarness(t)
	h.install(t, methodsPolicy())
	hits := countMethods(h.up.Server, "resources/read", "prompts/get", "resources/list", "resources/templates/list",
		"prompts/list", "completion/complete", "resources/subscribe")
	cs := h.connect(t, "/mcp/servers/test", devToken, nil, "2025-11-25")
	if res := call(t, cs, "echo", map[string]any{"text": "hi"}); res.IsError {
		t.Fatalf("echo: %+v", res)
	}
	if err := cs.SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatalf("logging/setLevel of a principal with tools: %v", err)
	}
	ctx := context.Background()
	_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://doc"})
	wantRefused(t, "resources/read", err, readiness.CodeMethodNotPermitted)
	_, err = cs.ListResources(ctx, nil)
	wantRefused(t, "resources/list", err, readiness.CodeMethodNotPermitted)
	_, err = cs.ListResourceTemplates(ctx, nil)
	wantRefused(t, "resources/templates/list", err, readiness.CodeMethodNotPermitted)
	_, err = cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet"})
	wantRefused(t, "prompts/get", err, readiness.CodeMethodNotPermitted)
	_, err = cs.ListPrompts(ctx, nil)
	wantRefused(t, "prompts/list", err, readiness.CodeMethodNotPermitted)
	_, err = cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "greet"},
		Argument: mcp.CompleteParamsArgument{Name: "who", Value: "a"}})
	wantRefused(t, "completion/complete", err, readiness.CodeMethodNotPermitted)
	err = cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "test://doc"})
	wantRefused(t, "resources/subscribe", err, readiness.CodeMethodNotPermitted)
	if n := hits.Load(); n != 0 {
		t.Fatalf("%d refused requests reached the upstream", n)
	}
	// ping is the agent's own: answered for a principal with neither tools
	// nor rules, and never relayed.
	pings := countMethods(h.up.Server, "ping")
	guest := h.connect(t, "/mcp/servers/test", guestToken, nil, "2025-11-25")
	for _, c := range []*mcp.ClientSession{cs, guest} {
		if err := c.Ping(ctx, nil); err != nil {
			t.Fatalf("ping: %v", err)
		}
	}
	if pings.Load() != 0 {
		t.Fatal("a ping reached the upstream")
	}
	for _, r := range []string{"resources/read test://doc", "prompts/get greet", "completion/complete greet", "resources/subscribe test://doc", "resources/list"} {
		wantRefusedReceipt(t, h, r, readiness.CodeMethodNotPermitted)
	}
}

// A rule for file:///public/* does not reach file:///secret/x: read and
// subscribe are refused (resource_not_permitted) before the upstream sees
// them; resources/list and resources/templates/list show only what the
// rule reaches, so listing and reading agree.
func TestMethodsResourcePattern(t *testing.T) {
	h := newHarness(t)
	reads := files(h)
	h.install(t, methodsPolicy(&mcpreadyv1.MethodRule{Server: "test", Allow: []string{"resources/*"}, Resources: []string{"file:///public/*"}}))
	subs := countMethods(h.up.Server, "resources/subscribe")
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			cs := h.connect(t, "/mcp/servers/test", devToken, nil, version)
			ctx := context.Background()
			_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file:///secret/x"})
			wantRefused(t, "read secret", err, readiness.CodeResourceNotPermitted)
			_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file:///public/../secret/x"})
			wantRefused(t, "read a dot-dot path", err, readiness.CodeResourceNotPermitted)
			rr, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file:///public/a"})
			if err != nil || rr.Contents[0].Text != "contents of file:///public/a" {
				t.Fatalf("read public: %v", err)
			}
			if uris := listed(t, cs.Resources(ctx, nil), func(r *mcp.Resource) string { return r.URI }); !slices.Equal(uris, []string{"file:///public/a"}) {
				t.Fatalf("resources/list shows %v, want only file:///public/a", uris)
			}
			if tpls := listed(t, cs.ResourceTemplates(ctx, nil), func(r *mcp.ResourceTemplate) string { return r.URITemplate }); !slices.Equal(tpls, []string{"file:///public/{name}"}) {
				t.Fatalf("resources/templates/list shows %v, want only file:///public/{name}", tpls)
			}
			_, err = cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet"})
			wantRefused(t, "prompts/get without a prompts grant", err, readiness.CodeMethodNotPermitted)
			if version == "2025-11-25" {
				err = cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "file:///secret/x"})
				wantRefused(t, "subscribe secret", err, readiness.CodeResourceNotPermitted)
				if subs.Load() != 0 {
					t.Fatal("the refused subscription reached the upstream")
				}
				if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "file:///public/a"}); err != nil {
					t.Fatalf("subscribe public: %v", err)
				}
				if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "file:///public/a"}); err != nil {
					t.Fatalf("unsubscribe public: %v", err)
				}
			}
		})
	}
	if slices.Contains(reads.list(), "file:///secret/x") {
		t.Fatalf("the upstream served the secret: %v", reads.list())
	}
	var refused int
	for _, r := range h.receiptsFor("resources/read file:///secret/x") {
		if r.GetOutcome() == mcpreadyv1.OutcomeClass_OUTCOME_CLASS_REFUSED && r.GetPrincipalClass() == "dev" {
			refused++
		}
	}
	if refused != 2 {
		t.Fatalf("%d refused receipts for the secret, want 2", refused)
	}
	wantRefusedReceipt(t, h, "resources/subscribe file:///secret/x", readiness.CodeResourceNotPermitted)
}

// A prompt not on the rule's allow-list is refused (prompt_not_permitted)
// and hidden from prompts/list; completion needs its own grant, and then
// reaches only the allowed prompts.
func TestMethodsPromptAllowList(t *testing.T) {
	h := newHarness(t)
	reads := files(h)
	completes := countMethods(h.up.Server, "completion/complete")
	greet := &mcpreadyv1.MethodRule{Server: "test", Allow: []string{"prompts/*"}, Prompts: []string{"greet"}}
	h.install(t, methodsPolicy(greet))
	cs := h.connect(t, "/mcp/servers/test", devToken, nil, "2025-11-25")
	ctx := context.Background()
	_, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "secret"})
	wantRefused(t, "prompts/get secret", err, readiness.CodePromptNotPermitted)
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet"}); err != nil {
		t.Fatalf("prompts/get greet: %v", err)
	}
	if names := listed(t, cs.Prompts(ctx, nil), func(p *mcp.Prompt) string { return p.Name }); !slices.Equal(names, []string{"greet"}) {
		t.Fatalf("prompts/list shows %v, want only greet", names)
	}
	complete := func(ref *mcp.CompleteReference) error {
		_, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: ref, Argument: mcp.CompleteParamsArgument{Name: "who", Value: "a"}})
		return err
	}
	wantRefused(t, "completion without a completion grant", complete(&mcp.CompleteReference{Type: "ref/prompt", Name: "greet"}), readiness.CodeMethodNotPermitted)
	if completes.Load() != 0 {
		t.Fatal("a refused completion reached the upstream")
	}

	greet.Allow = append(greet.Allow, "completion/complete")
	h.install(t, methodsPolicy(greet))
	if err := complete(&mcp.CompleteReference{Type: "ref/prompt", Name: "greet"}); err != nil {
		t.Fatalf("completion of greet: %v", err)
	}
	wantRefused(t, "completion of secret", complete(&mcp.CompleteReference{Type: "ref/prompt", Name: "secret"}), readiness.CodePromptNotPermitted)
	wantRefused(t, "completion of a resource", complete(&mcp.CompleteReference{Type: "ref/resource", URI: "file:///public/{name}"}), readiness.CodeResourceNotPermitted)
	if completes.Load() != 1 || len(reads.list()) != 0 {
		t.Fatalf("%d completions and %v reached the upstream, want 1 and none", completes.Load(), reads.list())
	}
	wantRefusedReceipt(t, h, "prompts/get secret", readiness.CodePromptNotPermitted)
	wantRefusedReceipt(t, h, "completion/complete secret", readiness.CodePromptNotPermitted)
}

// A principal with no tool of a server but a method rule for it opens a
// session (housekeeping admitted by the rule) and reads what the rule
// reaches; tools/list stays empty for it.
func TestMethodsWithoutTools(t *testing.T) {
	h := newHarness(t)
	p := testPolicy()
	p.Principals = append(p.Principals, &mcpreadyv1.PrincipalRule{PrincipalClass: "guest",
		Methods: []*mcpreadyv1.MethodRule{{Server: "test", Allow: []string{"resources/read"}, Resources: []string{"test://doc"}}}})
	h.install(t, p)
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			cs := h.connect(t, "/mcp/servers/test", guestToken, nil, version)
			if names := toolNames(t, cs); len(names) != 0 {
				t.Fatalf("guest sees tools %v", names)
			}
			if cs.InitializeResult().Capabilities.Resources == nil {
				t.Fatal("the guest's session does not present the upstream's resources")
			}
			rr, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "test://doc"})
			if err != nil || rr.Contents[0].Text != "hello doc" {
				t.Fatalf("guest read: %v", err)
			}
			_, err = cs.ListResources(context.Background(), nil)
			wantRefused(t, "guest resources/list", err, readiness.CodeMethodNotPermitted)
		})
	}
}
