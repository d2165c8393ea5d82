// Package artifact defines the authoring format of mcpready's signed
// artifacts: Kubernetes-style objects with apiVersion, kind, metadata and a
// spec that is one of the mcpready.v1 messages in protojson field names.
//
// It parses (strictly: unknown fields are errors), validates and
// canonicalises (RFC 8785) objects, and holds the enforcement table
// (Enforcement, Unenforced): for every spec field of every kind, whether
// mcpready enforces it and where. It does not sign or verify anything
// (package sign's job) and enforces nothing itself: the table only says
// which other package does, and callers warn about what none does.
package artifact

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/mcpready/mcpready/internal/canonjson"
	"github.com/mcpready/mcpready/internal/yamldoc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"
)

// APIVersion is the only apiVersion this package accepts.
const APIVersion = "mcpready.dev/v1"

// Sentinel errors. Errors returned by this package wrap one of them.
var (
	ErrMalformed   = errors.New("malformed artifact")
	ErrUnknownKind = errors.New("unknown kind")
	ErrAPIVersion  = errors.New("unsupported apiVersion")
	ErrInvalid     = errors.New("invalid artifact")
)

// Object is one authored artifact. The signed predicate is its canonical
// JSON form.
type Object struct {
	APIVersion string
	Kind       Kind
	Metadata   Metadata
	// Spec is the kind's message, e.g. *mcpreadyv1.Policy for KindPolicy.
	Spec proto.Message
}

// Metadata is the object's name and labels.
type Metadata struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
}

// New returns an Object of kind k named name holding spec. It does not
// check that spec matches k; Validate does.
func New(k Kind, name string, spec proto.Message) *Object {
	return &Object{APIVersion: APIVersion, Kind: k, Metadata: Metadata{Name: name}, Spec: spec}
}

type wireObject struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Metadata   json.RawMessage `json:"metadata"`
	Spec       json.RawMessage `json:"spec"`
}

// Parse reads an object from YAML or JSON. Unknown fields, a wrong
// apiVersion, an unknown kind or a missing name are errors.
func Parse(data []byte) (*Object, error) {
	jsonData, err := toJSON(data)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(jsonData))
	dec.DisallowUnknownFields()
	var w wireObject
	if err := dec.Decode(&w); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after object", ErrMalformed)
	}
	if w.APIVersion != APIVersion {
		return nil, fmt.Errorf("%w: %q (want %q)", ErrAPIVersion, w.APIVersion, APIVersion)
	}
	k, err := ParseKind(w.Kind)
	if err != nil {
		return nil, err
	}
	o := &Object{APIVersion: w.APIVersion, Kind: k}
	if len(w.Metadata) == 0 || string(w.Metadata) == "null" {
		return nil, fmt.Errorf("%w: metadata is required", ErrInvalid)
	}
	mdec := json.NewDecoder(bytes.NewReader(w.Metadata))
	mdec.DisallowUnknownFields()
	if err := mdec.Decode(&o.Metadata); err != nil {
		return nil, fmt.Errorf("%w: metadata: %v", ErrMalformed, err)
	}
	o.Spec = k.NewSpec()
	if len(w.Spec) > 0 && string(w.Spec) != "null" {
		if err := protojson.Unmarshal(w.Spec, o.Spec); err != nil {
			return nil, fmt.Errorf("%w: spec of %s: %v", ErrMalformed, k, err)
		}
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return o, nil
}

// toJSON returns data as JSON. A document that is valid JSON is taken as
// JSON: YAML reads some valid JSON differently (U+2028, U+2029 and U+0085
// inside strings are YAML line breaks), and the canonical JSON that gets
// signed must parse back to itself. Duplicate keys are errors either way.
func toJSON(data []byte) ([]byte, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, fmt.Errorf("%w: empty document", ErrMalformed)
	}
	if trimmed[0] == '{' {
		if json.Valid(trimmed) {
			if _, err := canonjson.Transform(trimmed); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
			}
			return trimmed, nil
		}
		var first json.RawMessage
		if dec := json.NewDecoder(bytes.NewReader(trimmed)); dec.Decode(&first) == nil {
			return nil, fmt.Errorf("%w: trailing data after object", ErrMalformed)
		}
	}
	jsonData, err := yamldoc.JSON(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return jsonData, nil
}

// Validate checks the object's apiVersion, kind, name and spec type.
func (o *Object) Validate() error {
	if o.APIVersion != APIVersion {
		return fmt.Errorf("%w: %q (want %q)", ErrAPIVersion, o.APIVersion, APIVersion)
	}
	if _, err := ParseKind(string(o.Kind)); err != nil {
		return err
	}
	if err := ValidateName(o.Metadata.Name); err != nil {
		return err
	}
	if o.Spec == nil || o.Spec.ProtoReflect().Descriptor().FullName() != o.Kind.NewSpec().ProtoReflect().Descriptor().FullName() {
		return fmt.Errorf("%w: spec of %s must be %s", ErrInvalid, o.Kind, o.Kind.NewSpec().ProtoReflect().Descriptor().FullName())
	}
	if err := checkSemantic(o); err != nil {
		return err
	}
	if err := checkEvidence(o); err != nil {
		return err
	}
	if err := checkInputClasses(o); err != nil {
		return err
	}
	if err := checkRetrieval(o); err != nil {
		return err
	}
	return checkMethods(o)
}

// ValidateName checks a metadata.name: 1-253 printable characters from
// [A-Za-z0-9._/@:+-], no "..", not starting or ending with "/".
func ValidateName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: metadata.name is required", ErrInvalid)
	}
	if len(name) > 253 {
		return fmt.Errorf("%w: metadata.name longer than 253 characters", ErrInvalid)
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._/@:+-", r)
		if !ok {
			return fmt.Errorf("%w: metadata.name %q contains %q", ErrInvalid, name, r)
		}
	}
	if strings.Contains(name, "..") || strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") || strings.Contains(name, "//") {
		return fmt.Errorf("%w: metadata.name %q is not a clean path", ErrInvalid, name)
	}
	return nil
}

// CanonicalJSON returns the RFC 8785 canonical JSON of the object. This is
// the predicate that gets signed and the input of Digest.
func (o *Object) CanonicalJSON() ([]byte, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	spec, err := protojson.Marshal(o.Spec)
	if err != nil {
		return nil, fmt.Errorf("%w: spec: %v", ErrInvalid, err)
	}
	md, err := json.Marshal(o.Metadata)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(wireObject{APIVersion: o.APIVersion, Kind: string(o.Kind), Metadata: md, Spec: spec})
	if err != nil {
		return nil, err
	}
	return canonjson.Transform(raw)
}

// YAML returns the object as YAML, for display.
func (o *Object) YAML() ([]byte, error) {
	c, err := o.CanonicalJSON()
	if err != nil {
		return nil, err
	}
	return yaml.JSONToYAML(c)
}

// Canonicalize returns the RFC 8785 form of arbitrary JSON.
func Canonicalize(jsonData []byte) ([]byte, error) {
	out, err := canonjson.Transform(jsonData)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return out, nil
}

// Digest returns "sha256:<hex>" of b.
func Digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// CanonicalDigest returns Digest(Canonicalize(jsonData)): the digest used
// for JSON Schemas and tool definitions.
func CanonicalDigest(jsonData []byte) (string, error) {
	c, err := Canonicalize(jsonData)
	if err != nil {
		return "", err
	}
	return Digest(c), nil
}
