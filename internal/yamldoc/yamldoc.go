// Package yamldoc converts one YAML or JSON document to JSON, strictly:
// repeated keys are errors (sigs.k8s.io/yaml's strict conversion), and so
// is anything after the first document — a second document, or data after
// its end marker — which the conversion alone would drop without a word.
// Empty documents after the first (a trailing "---") are allowed.
//
// It must not decode into types (its callers do, with unknown fields
// refused) and must not accept input of which it converts only a part.
package yamldoc

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
)

// ErrMoreThanOne is input holding more than one non-empty document.
var ErrMoreThanOne = errors.New("more than one document")

// JSON returns data's one document as JSON.
func JSON(data []byte) ([]byte, error) {
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, err
	}
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	for n := 0; ; {
		var doc yamlv3.Node
		switch err := dec.Decode(&doc); {
		case err == io.EOF:
			return j, nil
		case err != nil:
			return nil, fmt.Errorf("after the first document: %w", err)
		case empty(&doc):
			continue
		}
		if n++; n > 1 {
			return nil, ErrMoreThanOne
		}
	}
}

// empty reports whether doc holds nothing but a null.
func empty(doc *yamlv3.Node) bool {
	return len(doc.Content) == 0 || (doc.Content[0].Kind == yamlv3.ScalarNode && doc.Content[0].ShortTag() == "!!null")
}
