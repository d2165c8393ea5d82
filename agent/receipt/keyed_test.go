package receipt

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// guess enumerates the low-entropy argument space of the L-100 example
// (listing ids L-0 … L-9999, three statuses: about 30,000 guesses) with
// digest and reports the arguments whose digest is want.
func guess(want string, digest func([]byte) string) string {
	for i := range 10000 {
		for _, st := range []string{"active", "paused", "closed"} {
			args := fmt.Sprintf(`{"listing_id":"L-%d","status":%q}`, i, st)
			if digest([]byte(args)) == want {
				return args
			}
		}
	}
	return ""
}

// TestKeyedDigestResistsGuessing is the attack of issue 11: the receipt of
// {"listing_id":"L-100","status":"paused"} gave its arguments away to
// anyone enumerating a few thousand guesses against the plain SHA-256
// digest. With the organisation's digest key the receipt's digests are
// HMACs: guessing without the key (plain digest, or another key) finds
// nothing, and compliance, holding the key, confirms the guess.
func TestKeyedDigestResistsGuessing(t *testing.T) {
	key := []byte("the organisation's receipt digest key, 32+ bytes long")
	b := Builder{EmitterID: "host-1", Redaction: Redaction{DigestKey: key}}
	r := b.Start(time.Now())
	args := json.RawMessage(`{"listing_id":"L-100","status":"paused"}`)
	b.Arguments(r, args)
	b.Result(r, []byte(`{"ok":true}`))
	if !strings.HasPrefix(r.ArgumentsDigest, "hmac-sha256:") || !strings.HasPrefix(r.ResultDigest, "hmac-sha256:") || r.RedactionPolicyVersion != KeyedRedactionVersion {
		t.Fatalf("receipt digests %q %q (%s)", r.ArgumentsDigest, r.ResultDigest, r.RedactionPolicyVersion)
	}
	plain := func(b []byte) string { return ArgumentsDigest(b) }
	if got := guess(r.ArgumentsDigest, plain); got != "" {
		t.Fatalf("recovered %s by guessing without the key", got)
	}
	if got := guess(r.ArgumentsDigest, func(b []byte) string { return KeyedDigest([]byte("another key"), b) }); got != "" {
		t.Fatalf("recovered %s with another key", got)
	}
	if got := guess(r.ArgumentsDigest, func(b []byte) string { return KeyedDigest(key, b) }); got != `{"listing_id":"L-100","status":"paused"}` {
		t.Fatalf("compliance with the key found %q", got)
	}
	// Without a key the digest is the plain one, which guessing recovers:
	// what the key protects against.
	u := Builder{}.Start(time.Now())
	Builder{}.Arguments(u, args)
	if got := guess(u.ArgumentsDigest, plain); got == "" || u.RedactionPolicyVersion != DefaultRedactionVersion {
		t.Fatalf("unkeyed: %q", got)
	}
}
