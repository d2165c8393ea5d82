package artifact

// Retrieval: where an artifact was fetched from and the digest of the
// bytes fetched (provenance sourceUri and retrievalDigest), recorded by
// mcpready sign --source and checked by mcpready verify --source (package
// internal/retrieve does the fetching).

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// RecordRetrieval records in o's provenance where o was retrieved from
// (sourceUri) and the digest of the bytes retrieved (retrievalDigest),
// creating the provenance when o has none. A kind without provenance, a
// malformed digest, or a provenance that already names another source or
// digest is ErrInvalid, and o is left as it was.
func (o *Object) RecordRetrieval(source, digest string) error {
	if !validDigest(digest) {
		return fmt.Errorf("%w: retrieval digest %q is not sha256:<64 hex digits>", ErrInvalid, digest)
	}
	if o.Spec == nil {
		return fmt.Errorf("%w: no spec", ErrInvalid)
	}
	m := o.Spec.ProtoReflect()
	f := m.Descriptor().Fields().ByName("provenance")
	if f == nil {
		return fmt.Errorf("%w: a %s has no provenance", ErrInvalid, o.Kind)
	}
	p := o.Provenance()
	switch {
	case p.GetSourceUri() != "" && p.GetSourceUri() != source:
		return fmt.Errorf("%w: the artifact already names source %q", ErrInvalid, p.GetSourceUri())
	case p.GetRetrievalDigest() != "" && p.GetRetrievalDigest() != digest:
		return fmt.Errorf("%w: the artifact already names retrieval digest %s", ErrInvalid, p.GetRetrievalDigest())
	}
	if p == nil {
		p = &mcpreadyv1.Provenance{}
		m.Set(f, protoreflect.ValueOfMessage(p.ProtoReflect()))
	}
	p.SourceUri, p.RetrievalDigest = source, digest
	return nil
}

// validDigest reports whether d is "sha256:" and 64 lowercase hex digits,
// as Digest writes it.
func validDigest(d string) bool {
	h, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	for _, c := range h {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// checkRetrieval refuses a retrieval digest that Digest could not have
// written.
func checkRetrieval(o *Object) error {
	if d := o.Provenance().GetRetrievalDigest(); d != "" && !validDigest(d) {
		return fmt.Errorf("%w: provenance.retrievalDigest %q is not sha256:<64 hex digits>", ErrInvalid, d)
	}
	return nil
}
