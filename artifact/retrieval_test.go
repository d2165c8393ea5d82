package artifact

import (
	"errors"
	"strings"
	"testing"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// RecordRetrieval sets sourceUri and retrievalDigest, creating the
// provenance, and refuses a malformed digest, a kind without provenance
// and a provenance that names another source or digest, leaving the
// object as it was.
func TestRecordRetrieval(t *testing.T) {
	digest := Digest([]byte("as published"))
	o := New(KindDeclaration, "docs", &mcpreadyv1.Declaration{ServerName: "docs"})
	if err := o.RecordRetrieval("https://provider.example/declaration.yaml", digest); err != nil {
		t.Fatal(err)
	}
	if p := o.Provenance(); p.GetSourceUri() != "https://provider.example/declaration.yaml" || p.GetRetrievalDigest() != digest {
		t.Fatalf("provenance %v", p)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	// The same record again is no change.
	if err := o.RecordRetrieval("https://provider.example/declaration.yaml", digest); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ source, digest string }{
		"another source":   {"https://mirror.example/declaration.yaml", digest},
		"another digest":   {"https://provider.example/declaration.yaml", Digest([]byte("x"))},
		"malformed digest": {"https://provider.example/declaration.yaml", "sha256:" + strings.Repeat("A", 64)},
		"short digest":     {"https://provider.example/declaration.yaml", "sha256:00"},
	} {
		if err := o.RecordRetrieval(c.source, c.digest); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
		if p := o.Provenance(); p.GetSourceUri() != "https://provider.example/declaration.yaml" || p.GetRetrievalDigest() != digest {
			t.Fatalf("%s: provenance changed to %v", name, p)
		}
	}
	if err := New(KindReceiptBatch, "b", &mcpreadyv1.ReceiptBatch{}).RecordRetrieval("https://x/", digest); !errors.Is(err, ErrInvalid) {
		t.Errorf("receipt batch: %v, want ErrInvalid", err)
	}
}
