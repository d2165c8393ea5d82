// Package retrieve fetches an artifact from where it is published and
// checks a signed artifact's record of that retrieval (provenance
// sourceUri and retrievalDigest): the SHA-256 of the exact bytes fetched.
//
// It fetches over https, or plain http on a loopback address, bounded in
// size and time, following redirects within the source's origin only. It
// must not parse, trust or store what it fetches: callers parse it as an
// artifact and sign it, or compare digests.
package retrieve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/internal/loopback"
	"github.com/mcpready/mcpready/internal/redirect"
)

// MaxSize bounds what Fetch reads.
const MaxSize = 4 << 20

// Errors of Fetch and Check.
var (
	// ErrURL: the source is not an https URL (or http on loopback).
	ErrURL = errors.New("retrieve: source must be an https URL (plain http on a loopback address only)")
	// ErrFetch: the source could not be read (unreachable, an HTTP error,
	// over MaxSize, a redirect to another origin).
	ErrFetch = errors.New("retrieve: source not read")
	// ErrChanged: the source now serves other bytes than were retrieved.
	ErrChanged = errors.New("retrieve: the source has changed since it was retrieved")
	// ErrNotRecorded: the artifact records no sourceUri and
	// retrievalDigest to check.
	ErrNotRecorded = errors.New("retrieve: no source and retrieval digest recorded")
)

// Options configure Fetch. The zero value uses a client with a 30 s
// timeout.
type Options struct {
	// HTTP fetches the source; nil: a client with a 30 s timeout. Its
	// redirects are limited to the source's origin whatever its own
	// CheckRedirect says.
	HTTP *http.Client
}

// Fetch reads the bytes at source and returns them with their digest
// (artifact.Digest: "sha256:<hex>").
func Fetch(ctx context.Context, source string, o Options) ([]byte, string, error) {
	u, err := url.Parse(source)
	if err != nil || u.Host == "" || !loopback.Confidential(u) {
		return nil, "", fmt.Errorf("%w: %q", ErrURL, source)
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	if o.HTTP != nil {
		c := *o.HTTP
		hc = &c
	}
	hc.CheckRedirect = redirect.SameOrigin
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", ErrFetch, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", ErrFetch, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("%w: HTTP %d", ErrFetch, resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxSize+1))
	switch {
	case err != nil:
		return nil, "", fmt.Errorf("%w: %w", ErrFetch, err)
	case len(b) > MaxSize:
		return nil, "", fmt.Errorf("%w: over %d bytes", ErrFetch, MaxSize)
	}
	return b, artifact.Digest(b), nil
}

// Check fetches o's recorded source again and compares the digest of what
// it serves now with the recorded retrieval digest: nil when they are
// equal, ErrChanged when not, ErrNotRecorded when o records no source or
// no digest, and Fetch's errors when the source cannot be read.
func Check(ctx context.Context, o *artifact.Object, opts Options) error {
	p := o.Provenance()
	if p.GetSourceUri() == "" || p.GetRetrievalDigest() == "" {
		return ErrNotRecorded
	}
	_, got, err := Fetch(ctx, p.GetSourceUri(), opts)
	if err != nil {
		return err
	}
	if got != p.GetRetrievalDigest() {
		return fmt.Errorf("%w: %s now serves %s, retrieved %s", ErrChanged, p.GetSourceUri(), got, p.GetRetrievalDigest())
	}
	return nil
}
