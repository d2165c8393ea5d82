package docs

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"sigs.k8s.io/yaml"

	"github.com/mcpready/mcpready/artifact"
)

var update = flag.Bool("update", false, "rewrite the generated sections of reference.md")

const (
	beginArtifacts = "<!-- BEGIN GENERATED: artifact fields (go test ./docs -update) -->"
	endArtifacts   = "<!-- END GENERATED: artifact fields -->"
	protoPackage   = "mcpready.v1"
)

// protoComments maps "Message" and "Message.field" (and "Enum.VALUE") to
// the comment written above them in the .proto files.
func protoComments(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("../proto/mcpready/v1/*.proto")
	if err != nil || len(files) == 0 {
		t.Fatalf("no proto files: %v", err)
	}
	decl := regexp.MustCompile(`^(message|enum|service)\s+(\w+)\s*\{`)
	field := regexp.MustCompile(`^(?:repeated\s+|optional\s+)?(?:map<[^>]+>|[\w.]+)\s+(\w+)\s*=\s*\d+`)
	value := regexp.MustCompile(`^([A-Z][A-Z0-9_]*)\s*=\s*-?\d+`)
	out := map[string]string{}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		var stack []string
		var comment []string
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			switch {
			case strings.HasPrefix(line, "//"):
				comment = append(comment, strings.TrimSpace(strings.TrimPrefix(line, "//")))
				continue
			case decl.MatchString(line):
				name := decl.FindStringSubmatch(line)[2]
				stack = append(stack, name)
				out[strings.Join(stack, ".")] = joinComment(comment)
			case line == "}":
				if len(stack) > 0 {
					stack = stack[:len(stack)-1]
				}
			case len(stack) > 0 && field.MatchString(line):
				out[strings.Join(stack, ".")+"."+field.FindStringSubmatch(line)[1]] = joinComment(comment)
			case len(stack) > 0 && value.MatchString(line):
				out[strings.Join(stack, ".")+"."+value.FindStringSubmatch(line)[1]] = joinComment(comment)
			}
			comment = nil
		}
		fh.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// joinComment joins comment lines, dropping a leading one-word section
// heading such as "Provenance." that labels a group of fields.
func joinComment(lines []string) string {
	if len(lines) > 0 && regexp.MustCompile(`^\w+\.$`).MatchString(lines[0]) {
		lines = lines[1:]
	}
	return strings.Join(lines, " ")
}

func typeName(fd protoreflect.FieldDescriptor) string {
	var s string
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		s = typeLink(fd.Message().FullName())
	case protoreflect.EnumKind:
		s = typeLink(fd.Enum().FullName())
	default:
		s = fd.Kind().String()
	}
	switch {
	case fd.IsMap():
		return fmt.Sprintf("map<%s, %s>", typeName(fd.MapKey()), typeName(fd.MapValue()))
	case fd.IsList():
		return s + "[]"
	}
	return s
}

func typeLink(n protoreflect.FullName) string {
	switch n {
	case "google.protobuf.Timestamp":
		return "timestamp (RFC 3339)"
	case "google.protobuf.Duration":
		return `duration ("1.5s")`
	}
	if n.Parent() == protoPackage {
		return fmt.Sprintf("[%s](#%s)", n.Name(), strings.ToLower(string(n.Name())))
	}
	return string(n)
}

func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	if s == "" {
		return "—"
	}
	return s
}

// generateArtifacts renders the field tables of every artifact kind's spec
// and of every mcpready.v1 message and enum they reach.
func generateArtifacts(t *testing.T) string {
	known := map[string]bool{}
	defer func() {
		for k := range fieldDescriptions(t) {
			if !known[k] {
				t.Errorf("fields.yaml: %q names no artifact field or enum value", k)
			}
		}
	}()
	comments := protoComments(t)
	extra := fieldDescriptions(t)
	describe := func(proto, json string) string {
		known[json] = true
		if c := comments[proto]; c != "" {
			return c
		}
		return extra[json]
	}
	var b strings.Builder
	seen := map[protoreflect.FullName]bool{}
	var messages []protoreflect.MessageDescriptor
	var enums []protoreflect.EnumDescriptor
	var visit func(md protoreflect.MessageDescriptor)
	visit = func(md protoreflect.MessageDescriptor) {
		fields := md.Fields()
		for i := 0; i < fields.Len(); i++ {
			fd := fields.Get(i)
			if fd.IsMap() {
				fd = fd.MapValue()
			}
			switch fd.Kind() {
			case protoreflect.MessageKind:
				if m := fd.Message(); m.FullName().Parent() == protoPackage && !seen[m.FullName()] {
					seen[m.FullName()] = true
					messages = append(messages, m)
					visit(m)
				}
			case protoreflect.EnumKind:
				if e := fd.Enum(); e.FullName().Parent() == protoPackage && !seen[e.FullName()] {
					seen[e.FullName()] = true
					enums = append(enums, e)
				}
			}
		}
	}
	table := func(md protoreflect.MessageDescriptor) {
		b.WriteString("| field | type | meaning |\n|---|---|---|\n")
		fields := md.Fields()
		for i := 0; i < fields.Len(); i++ {
			fd := fields.Get(i)
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", fd.JSONName(), cell(typeName(fd)), cell(describe(string(md.Name())+"."+string(fd.Name()), string(md.Name())+"."+fd.JSONName())))
		}
		b.WriteString("\n")
	}

	b.WriteString(beginArtifacts + "\n\n")
	b.WriteString("Every artifact is written as `apiVersion: mcpready.dev/v1`, `kind`, `metadata: {name, labels}` and a `spec` whose fields follow. Field names are the protobuf JSON names; enums are written by value name; 64-bit integers may be strings.\n\n")
	for _, k := range artifact.Kinds() {
		md := k.NewSpec().ProtoReflect().Descriptor()
		seen[md.FullName()] = true
		fmt.Fprintf(&b, "### %s\n\n", k)
		if c := comments[string(md.Name())]; c != "" {
			b.WriteString(c + "\n\n")
		}
		fmt.Fprintf(&b, "In-toto predicate type `%s`; discovery type URL `%s`.\n\n", k.PredicateType(), k.TypeURL())
		table(md)
		enforcementTable(&b, k)
		visit(md)
	}
	sort.Slice(messages, func(i, j int) bool { return messages[i].Name() < messages[j].Name() })
	b.WriteString("### Message types\n\n")
	for _, m := range messages {
		fmt.Fprintf(&b, "#### %s\n\n", m.Name())
		if c := comments[string(m.Name())]; c != "" {
			b.WriteString(c + "\n\n")
		}
		table(m)
	}
	sort.Slice(enums, func(i, j int) bool { return enums[i].Name() < enums[j].Name() })
	b.WriteString("### Enums\n\n")
	for _, e := range enums {
		fmt.Fprintf(&b, "#### %s\n\n", e.Name())
		if c := comments[string(e.Name())]; c != "" {
			b.WriteString(c + "\n\n")
		}
		b.WriteString("| value | meaning |\n|---|---|\n")
		vals := e.Values()
		for i := 0; i < vals.Len(); i++ {
			v := vals.Get(i)
			fmt.Fprintf(&b, "| `%s` | %s |\n", v.Name(), cell(describe(string(e.Name())+"."+string(v.Name()), string(e.Name())+"."+string(v.Name()))))
		}
		b.WriteString("\n")
	}
	b.WriteString(endArtifacts)
	return b.String()
}

// enforcementTable renders artifact.Enforcement(k): for every field path
// of the kind, whether mcpready enforces it and where. The table in
// package artifact is the only source; this renders it.
func enforcementTable(b *strings.Builder, k artifact.Kind) {
	fmt.Fprintf(b, "Enforcement of every %s field (from `artifact.Enforcement`; **not enforced** fields make `mcpready apply` and the agent warn):\n\n", k)
	b.WriteString("| field | status | enforced by | note |\n|---|---|---|---|\n")
	for _, f := range artifact.Enforcement(k) {
		status := f.Status.String()
		if f.Status == artifact.NotEnforced {
			status = "**not enforced**"
		}
		fmt.Fprintf(b, "| `%s` | %s | %s | %s |\n", f.Path, status, cell(f.Where), cell(f.Note))
	}
	b.WriteString("\n")
}

// fieldDescriptions reads fields.yaml, the descriptions of fields that
// have no comment in proto/. A key that names no field is an error, so the
// file cannot drift from the protos unnoticed.
func fieldDescriptions(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile("fields.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]string
	if err := yaml.UnmarshalStrict(data, &m); err != nil {
		t.Fatalf("fields.yaml: %v", err)
	}
	return m
}

// replaceSection swaps the text between begin and end (inclusive).
func replaceSection(doc, begin, end, section string) (string, error) {
	i := strings.Index(doc, begin)
	j := strings.Index(doc, end)
	if i < 0 || j < i {
		return "", fmt.Errorf("markers %q ... %q not found", begin, end)
	}
	return doc[:i] + section + doc[j+len(end):], nil
}

func TestReferenceArtifactsUpToDate(t *testing.T) {
	checkSection(t, beginArtifacts, endArtifacts, generateArtifacts(t), "the artifact field tables")
}

// checkSection fails when the generated section of reference.md between
// begin and end is not section (what names it in the message), and with
// -update rewrites it.
func checkSection(t *testing.T, begin, end, section, what string) {
	t.Helper()
	const path = "reference.md"
	cur, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := replaceSection(string(cur), begin, end, section)
	if err != nil {
		t.Fatal(err)
	}
	if want == string(cur) {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s: %s are stale; regenerate with: go test ./docs -update", path, what)
}
