package mcpregistry

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// metaOf is the registry metadata of a record as the registry documents
// it, read by exact key: the record's _meta (a flat server.json's own), the
// server's _meta, and whether the record wraps its server.json.
func metaOf(t *testing.T, raw []byte) (outer, server map[string]json.RawMessage, name, version string, wrapped bool) {
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil {
		t.Fatalf("%q accepted: not a JSON object", raw)
	}
	obj := func(b json.RawMessage) map[string]json.RawMessage {
		var m map[string]json.RawMessage
		if len(b) > 0 && json.Unmarshal(b, &m) != nil {
			t.Fatalf("%q accepted: _meta %q is not an object", raw, b)
		}
		return m
	}
	str := func(m map[string]json.RawMessage, key string) string {
		var s string
		if json.Unmarshal(m[key], &s) != nil {
			t.Fatalf("%q accepted: %s %q is not a string", raw, key, m[key])
		}
		return s
	}
	if s, ok := top["server"]; ok && string(s) != "null" {
		var sv map[string]json.RawMessage
		if json.Unmarshal(s, &sv) != nil {
			t.Fatalf("%q accepted: server %q is not an object", raw, s)
		}
		return obj(top["_meta"]), obj(sv["_meta"]), str(sv, "name"), str(sv, "version"), true
	}
	m := obj(top["_meta"])
	return m, m, str(top, "name"), str(top, "version"), false
}

// FuzzDecode: decode refuses a record with ErrResponse or returns one
// with a name and a version whose registry metadata is what the record
// holds under the exact keys (official metadata exactly when it is an
// object, publisher metadata preferably from the server's own _meta, every
// _meta an object), that survives being written back as a canonical
// {"server", "_meta"} record and decoded again, and whose drafts are valid
// CANDIDATE entries, one per Streamable HTTP remote.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"server":{"name":"io.github.acme/docs","version":"2.4.1","description":"Docs","remotes":[{"type":"streamable-http","url":"https://docs.acme.example/mcp"}],
		"_meta":{"io.modelcontextprotocol.registry/publisher-provided":{"tool":"ci"}}},
		"_meta":{"io.modelcontextprotocol.registry/official":{"status":"active","publishedAt":"2026-09-01T10:00:00Z","updatedAt":"2026-09-01T10:00:00Z","isLatest":true}}}`,
		`{"server":{"name":"io.github.pkg/only","version":"0.3.0","packages":[{"registryType":"npm","identifier":"@pkg/only","version":"0.3.0"}]},
		"_meta":{"io.modelcontextprotocol.registry/official":{"status":"active","isLatest":true}}}`,
		`{"name":"io.github.flat/legacy","version":"1.2.0","remotes":[{"type":"sse","url":"https://flat.example/sse"},{"type":"streamable-http","url":"https://flat.example/mcp"}]}`,
		`{"name":"com.example/flat","version":"1","_meta":{"io.modelcontextprotocol.registry/official":{"status":"deleted","publishedAt":"2026-01-01T00:00:00+02:00"}}}`,
		`{"server":{"version":"1"}}`, `{"server":{"name":"a","version":"1"},"_meta":{"io.modelcontextprotocol.registry/official":{"publishedAt":7}}}`,
		`{"server":{"name":"a","version":"1","remotes":[{"type":"streamable-http","url":"::"}]}}`, `<html>`, `[]`, `null`, `{}`,
		`{"server":{"name":"a","version":"1","_meta":5}}`, `{"server":{"name":"a","version":"1"},"_meta":{"io.modelcontextprotocol.registry/official":null}}`,
		`{"server":{"name":"a","version":"1"},"_meta":{"io.modelcontextprotocol.registry/publisher-provided":{"x":1}}}`,
		`{"server":null,"name":"a","version":"1"}`, `{"server":{"name":"com.evil/x","version":"1","Name":"io.github.trusted/x"}}`,
		`{"server":{"name":"a","version":"1","_meta":{"io.modelcontextprotocol.registry/publisher-provided":null}},"_meta":{"io.modelcontextprotocol.registry/publisher-provided":{}}}`, `{"server":{"name":"a/../b","version":"../1","remotes":[{"type":"streamable-http","url":"u"},{"type":"streamable-http","url":"v"}]}}`,
		`{"server":{"name":"io.github.a/` + strings.Repeat("x", 300) + `","version":"1","remotes":[{"type":"streamable-http","url":"u"}]}}`,
		`{"name":"a","version":"` + strings.Repeat("9", 250) + `","remotes":[{"type":"streamable-http","url":"u"},{"type":"streamable-http","url":"v"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := decode(raw)
		if err != nil {
			if !errors.Is(err, ErrResponse) {
				t.Fatalf("%q: untyped error %v", raw, err)
			}
			return
		}
		if r.Server.Name == "" || r.Server.Version == "" {
			t.Fatalf("%q: record without name or version accepted", raw)
		}
		outer, server, name, version, wrapped := metaOf(t, raw)
		if r.Server.Name != name || r.Server.Version != version {
			t.Fatalf("%q: server %q version %q, the record names %q version %q", raw, r.Server.Name, r.Server.Version, name, version)
		}
		official, hasOfficial := outer[MetaOfficial]
		hasOfficial = hasOfficial && bytes.HasPrefix(official, []byte("{"))
		if r.HasOfficial != hasOfficial {
			t.Fatalf("%q: official metadata %v, record holds %q", raw, r.HasOfficial, official)
		}
		want := server[MetaPublisher]
		if len(want) == 0 || string(want) == "null" {
			want = outer[MetaPublisher]
		}
		if string(want) == "null" {
			want = nil
		}
		if !bytes.Equal(r.Publisher, want) {
			t.Fatalf("%q: publisher metadata %q, want %q", raw, r.Publisher, want)
		}

		// Written back canonically, the record decodes to itself.
		meta := map[string]any{}
		if r.HasOfficial {
			meta[MetaOfficial] = r.Official
		}
		if r.Publisher != nil {
			meta[MetaPublisher] = r.Publisher
		}
		doc, err := json.Marshal(map[string]any{"server": r.Server, "_meta": meta})
		if err != nil {
			t.Fatalf("%q (wrapped %v): %v", raw, wrapped, err)
		}
		again, err := decode(doc)
		if err != nil {
			t.Fatalf("%q written back as %s: %v", raw, doc, err)
		}
		a, _ := json.Marshal(r)
		b, _ := json.Marshal(again)
		if !bytes.Equal(a, b) {
			t.Fatalf("%q written back as %s: decoded %s, was %s", raw, doc, b, a)
		}

		n := 0
		for _, rm := range r.Server.Remotes {
			if rm.Type == "streamable-http" && rm.URL != "" {
				n++
			}
		}
		drafts := Drafts("https://registry.example", []Record{r})
		if len(drafts) != n {
			t.Fatalf("%q: %d drafts for %d Streamable HTTP remotes", raw, len(drafts), n)
		}
		names := map[string]bool{}
		for _, d := range drafts {
			e := d.Spec.(*mcpreadyv1.RegistryEntry)
			if err := d.Validate(); err != nil {
				t.Fatalf("%q: draft %q: %v", raw, d.Metadata.Name, err)
			}
			if names[d.Metadata.Name] || !strings.HasPrefix(d.Metadata.Name, "imported/") {
				t.Fatalf("%q: draft name %q", raw, d.Metadata.Name)
			}
			names[d.Metadata.Name] = true
			if e.GetState() != mcpreadyv1.LifecycleState_LIFECYCLE_STATE_CANDIDATE || e.GetQualification() != nil ||
				e.GetIdentity().GetServerName() != r.Server.Name || e.GetIdentity().GetServerVersion() != r.Server.Version {
				t.Fatalf("%q: draft %v", raw, e)
			}
		}
	})
}
