package validate

import (
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ContentTexts appends the texts of content block c that the injection
// tripwire scans, wherever the block travels (a tool result, a prompt
// message, a sampling request): a text; an embedded resource's contents
// (ResourceTexts); a resource link's name, title, description and URI; a
// tool result's content blocks and the strings of its structured content;
// the strings of a tool use's input. Images and audio have none.
func ContentTexts(out []string, c mcp.Content) []string {
	switch c := c.(type) {
	case *mcp.TextContent:
		out = append(out, c.Text)
	case *mcp.EmbeddedResource:
		out = ResourceTexts(out, c.Resource)
	case *mcp.ResourceLink:
		out = append(out, c.Name, c.Title, c.Description, c.URI)
	case *mcp.ToolResultContent:
		for _, b := range c.Content {
			out = ContentTexts(out, b)
		}
		out = ValueTexts(out, c.StructuredContent)
	case *mcp.ToolUseContent:
		out = ValueTexts(out, c.Input)
	}
	return out
}

// ResourceTexts appends the texts of one resource's contents: its text,
// and its blob when that is valid UTF-8 (text sent as a blob, whatever
// MIME type the upstream claims, is scanned like text; binary is not).
func ResourceTexts(out []string, r *mcp.ResourceContents) []string {
	if r == nil {
		return out
	}
	out = append(out, r.Text)
	if len(r.Blob) > 0 && utf8.Valid(r.Blob) {
		out = append(out, string(r.Blob))
	}
	return out
}

// ValueTexts appends the strings of v, a value decoded from JSON (maps,
// slices, strings): object keys and string values, at any depth.
func ValueTexts(out []string, v any) []string {
	eachString(v, func(s string) bool {
		out = append(out, s)
		return false
	})
	return out
}

// eachString calls f with every string of v (see ValueTexts) until f
// returns true, and reports whether it did.
func eachString(v any, f func(string) bool) bool {
	switch x := v.(type) {
	case string:
		return f(x)
	case []any:
		for _, e := range x {
			if eachString(e, f) {
				return true
			}
		}
	case map[string]any:
		for k, e := range x {
			if f(k) || eachString(e, f) {
				return true
			}
		}
	}
	return false
}
