package pipeline

import (
	"context"
	"errors"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

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
	got := methodTexts(res)
	want := map[string]bool{"embedded": true, "link": true, "linked": true}
	for _, s := range got {
		delete(want, s)
	}
	if len(want) != 0 {
		t.Fatalf("texts %q miss %v", got, want)
	}
}
