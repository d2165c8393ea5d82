package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/decide"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// Without a policy a non-tool request is refused, receipted, and never run.
func TestMethodRefusedWithoutPolicy(t *testing.T) {
	var recs []*mcpreadyv1.Receipt
	p := New(Options{Emit: func(r *mcpreadyv1.Receipt) { recs = append(recs, r) }})
	ran := false
	_, err := p.Method(context.Background(), State{}, Method{Method: "resources/read", Server: "s", Name: "s://x"},
		func(context.Context) (mcp.Result, error) { ran = true; return &mcp.ReadResourceResult{}, nil })
	var me *MethodError
	if !errors.As(err, &me) || me.Code != readiness.CodeNoPolicy || ran {
		t.Fatalf("err %v, ran %v", err, ran)
	}
	if len(recs) != 1 || recs[0].GetRequested() != "resources/read s://x" || recs[0].GetReceiptId() != me.Receipt {
		t.Fatalf("receipts %v", recs)
	}
}

func TestMethodTexts(t *testing.T) {
	res := &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{
		{Role: "user", Content: &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "a://b", Text: "embedded"}}},
		{Role: "user", Content: &mcp.ResourceLink{URI: "a://c", Name: "link", Description: "linked"}},
	}}
	read := &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "a://d", Text: "read"}, nil, {URI: "a://e", Blob: []byte("blob")}}}
	// A prompt argument's title and description are shown like the
	// prompt's own (they were not scanned before).
	list := &mcp.ListPromptsResult{Prompts: []*mcp.Prompt{{Name: "p", Arguments: []*mcp.PromptArgument{{Name: "arg", Title: "argtitle", Description: "argdesc"}}}}}
	got := append(append(methodTexts(res), methodTexts(read)...), methodTexts(list)...)
	want := map[string]bool{"embedded": true, "link": true, "linked": true, "a://c": true, "read": true, "blob": true, "arg": true, "argtitle": true, "argdesc": true}
	for _, s := range got {
		delete(want, s)
	}
	if len(want) != 0 {
		t.Fatalf("texts %q miss %v", got, want)
	}
}

// A listing keeps only what the method rules show, in a new list (an
// emptied one is [] on the wire); the upstream's result is untouched.
func TestShownListing(t *testing.T) {
	snap, err := decide.NewSnapshot(decide.Inputs{Policy: &mcpreadyv1.Policy{Inventory: []string{"*"},
		Principals: []*mcpreadyv1.PrincipalRule{{PrincipalClass: "dev", Methods: []*mcpreadyv1.MethodRule{
			{Server: "s", Allow: []string{"resources/*"}, Resources: []string{"s://public/*"}}}}}},
		Entries: map[string]*mcpreadyv1.RegistryEntry{"e": {Identity: &mcpreadyv1.ToolIdentity{ServerName: "s", ToolName: "t"},
			State: mcpreadyv1.LifecycleState_LIFECYCLE_STATE_QUALIFIED}}})
	if err != nil {
		t.Fatal(err)
	}
	acc, rj := snap.AdmitMethod(decide.MethodRequest{Method: "resources/list", Server: "s", Principal: "dev"})
	if rj != nil {
		t.Fatal(rj)
	}
	up := &mcp.ListResourcesResult{Resources: []*mcp.Resource{{URI: "s://public/a"}, nil, {URI: "s://secret/b"}}, NextCursor: "next"}
	got := shown(up, acc).(*mcp.ListResourcesResult)
	if len(got.Resources) != 1 || got.Resources[0].URI != "s://public/a" || got.NextCursor != "next" || len(up.Resources) != 3 || up.Resources[2].URI != "s://secret/b" {
		t.Fatalf("shown %+v from %+v", got, up)
	}
	none := shown(&mcp.ListPromptsResult{Prompts: []*mcp.Prompt{{Name: "p"}}}, acc)
	if b, _ := json.Marshal(none); !strings.Contains(string(b), `"prompts":[]`) {
		t.Fatalf("emptied listing %s", b)
	}
}
