// Package idempotency keeps the host agent's idempotency bindings: for every
// idempotency key a call carried, durably and for the key's retention, the
// scope it is bound to (tenant class, principal class and requested tool),
// the principal that bound it, the digest of the arguments it was first
// used with, the route that ran it and the outcome. With them the call
// pipeline forwards a repeat of the same payload as a repeat, refuses the
// same key with another payload, in another scope or from another
// principal before any upstream sees it, and allocates keys for
// state-changing calls to providers that declare key support.
//
// It stores keyed references (HMAC-SHA-256 under a secret kept in its
// directory), never the keys or principal names themselves, and never
// arguments: only their digest. It must not decide whether a call may be
// retried (package decide does) nor talk to any server.
package idempotency

import (
	"bufio"
	"cmp"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// MetaKey is the _meta field that carries an idempotency key, from the
// client to the agent and from the agent to the upstream.
const MetaKey = "mcpready.dev/idempotency-key"

// MaxKeyLen bounds a key (the Idempotency-Key draft's keys are short
// strings; a UUID is 36 characters).
const MaxKeyLen = 255

// DefaultRetention is how long a binding is kept when the provider
// declares no retention.
const DefaultRetention = 24 * time.Hour

// Errors. Each is returned wrapped with a reason that never repeats the key.
var (
	// ErrKeyInvalid: the key is empty, longer than MaxKeyLen, or has a
	// character outside printable ASCII (0x21-0x7E).
	ErrKeyInvalid = errors.New("idempotency: malformed key")
	// ErrKeyReused: the key is bound to a different payload.
	ErrKeyReused = errors.New("idempotency: key reused with a different payload")
	// ErrKeyScope: the key is bound to another tenant class, principal
	// class, principal or tool.
	ErrKeyScope = errors.New("idempotency: key bound to another tenant, principal or tool")
	// ErrStore: the binding could not be made durable.
	ErrStore = errors.New("idempotency: store")
	// ErrFull: a new key would take the live bindings past Options.MaxKeys,
	// or its caller's past Options.MaxKeysPerCaller. Keys already bound
	// still work; room comes back as bindings expire.
	ErrFull = errors.New("idempotency: too many live keys")
)

// Binding is what one key is bound to.
type Binding struct {
	// Ref is the keyed reference of the key (Store.Ref).
	Ref string `json:"ref"`
	// Scope is the binding's scope (see Scope).
	Scope string `json:"scope"`
	// Principal is the keyed reference of the principal that bound the key
	// (its name, never stored as it is); "" for a binding written before
	// bindings named their principal, which the first principal to use it
	// again claims.
	Principal string `json:"principal,omitempty"`
	// Digest of the arguments the key was first used with.
	Digest string `json:"digest"`
	// Entry is the registry entry that ran the call ("" until known).
	Entry string `json:"entry,omitempty"`
	// Outcome is the OutcomeClass name of the last call with the key ("" until known).
	Outcome string `json:"outcome,omitempty"`
	// Expires is when the binding is forgotten.
	Expires time.Time `json:"expires"`
}

// Scope is the scope a key is bound to: the caller's tenant class and
// principal class and the requested tool, written
// "<tenant class>;<principal class>/<tool>" with both classes
// path-escaped, and without "<tenant class>;" when there is none
// ("dev/docs/lookup"). The escaping keeps scopes apart that plain
// concatenation would confuse (a principal class "acme;dev" of no tenant
// and principal class "dev" of tenant "acme").
func Scope(tenant, principal, tool string) string {
	p := url.PathEscape(principal) + "/" + tool
	if tenant == "" {
		return p
	}
	return url.PathEscape(tenant) + ";" + p
}

// Options configures Open. The zero value is usable.
type Options struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// MaxKeys caps the live bindings; 0 means DefaultMaxKeys.
	MaxKeys int
	// MaxKeysPerCaller caps the live bindings of one caller: one
	// principal of one tenant class and principal class, so that no
	// principal uses up another's share; 0 means DefaultMaxKeysPerCaller.
	MaxKeysPerCaller int
}

// Defaults of Options.MaxKeys and Options.MaxKeysPerCaller: a caller that
// binds a key every second for DefaultRetention stays within them.
const (
	DefaultMaxKeys          = 250_000
	DefaultMaxKeysPerCaller = 100_000
)

// Store is a durable set of bindings. It is safe for concurrent use.
type Store struct {
	mu      sync.Mutex
	now     func() time.Time
	secret  []byte
	path    string
	f       *os.File
	w       *bufio.Writer
	m       map[string]Binding
	appends int // records written since the last compaction

	// callers counts the bindings in m per caller (callerOf them);
	// swept is when expired bindings were last dropped to make room.
	callers         map[string]int
	maxKeys, maxPer int
	swept           time.Time
}

const (
	secretFile   = "secret"
	bindingsFile = "bindings.jsonl"
)

// Open opens (creating) the store in dir: its secret and its bindings,
// dropping expired ones.
func Open(dir string, opts Options) (*Store, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStore, err)
	}
	secret, err := loadSecret(filepath.Join(dir, secretFile))
	if err != nil {
		return nil, err
	}
	s := &Store{now: opts.Now, secret: secret, path: filepath.Join(dir, bindingsFile), m: map[string]Binding{},
		callers: map[string]int{}, maxKeys: cmp.Or(opts.MaxKeys, DefaultMaxKeys), maxPer: cmp.Or(opts.MaxKeysPerCaller, DefaultMaxKeysPerCaller)}
	if err := s.load(); err != nil {
		return nil, err
	}
	if err := s.compact(); err != nil {
		return nil, err
	}
	return s, nil
}

func loadSecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil && len(b) == 32 {
		return b, nil
	}
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: secret %s unreadable or not 32 bytes", ErrStore, path)
	}
	b = make([]byte, 32)
	_, _ = rand.Read(b)
	tmp := path + ".tmp"
	if err := writeSync(tmp, b); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStore, err)
	}
	return b, nil
}

func writeSync(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStore, err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStore, err)
	}
	return nil
}

// load replays the bindings file; later records replace earlier ones. A
// torn last line (a crash mid-append) is ignored.
func (s *Store) load() error {
	f, err := os.Open(s.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStore, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	now := s.now()
	for sc.Scan() {
		var b Binding
		if json.Unmarshal(sc.Bytes(), &b) != nil || b.Ref == "" {
			continue
		}
		if b.Expires.After(now) {
			s.put(b)
		} else {
			s.drop(b.Ref)
		}
	}
	return nil
}

// compact rewrites the file with the live bindings only.
func (s *Store) compact() error {
	var buf []byte
	now := s.now()
	for ref, b := range s.m {
		if !b.Expires.After(now) {
			s.drop(ref)
			continue
		}
		line, _ := json.Marshal(b)
		buf = append(append(buf, line...), '\n')
	}
	tmp := s.path + ".tmp"
	if err := writeSync(tmp, buf); err != nil {
		return err
	}
	if s.f != nil {
		_ = s.f.Close()
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return fmt.Errorf("%w: %w", ErrStore, err)
	}
	f, err := os.OpenFile(s.path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStore, err)
	}
	s.f, s.w, s.appends = f, bufio.NewWriter(f), 0
	return nil
}

// Close closes the store's file.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}

// CheckKey returns nil when key is a well-formed key, else an error
// wrapping ErrKeyInvalid that never repeats the key.
func CheckKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty", ErrKeyInvalid)
	}
	if len(key) > MaxKeyLen {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrKeyInvalid, len(key), MaxKeyLen)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x21 || c > 0x7e {
			return fmt.Errorf("%w: byte %d is not printable ASCII", ErrKeyInvalid, i)
		}
	}
	return nil
}

// FromMeta reads the key a client put in _meta[MetaKey]: present says
// whether the field is there at all. A present value that is not a JSON
// string (a number, an object, null) is an error wrapping ErrKeyInvalid
// that names its JSON type, never its value: it is not "no key", which
// would let the agent allocate a key of its own and a client's retry with
// the same value be applied again.
func FromMeta(meta map[string]any) (key string, present bool, err error) {
	v, present := meta[MetaKey]
	if !present {
		return "", false, nil
	}
	key, ok := v.(string)
	if !ok {
		return "", true, fmt.Errorf("%w: _meta %q is %s, not a string", ErrKeyInvalid, MetaKey, jsonType(v))
	}
	return key, true, nil
}

// jsonType names the JSON type of a value decoded by encoding/json.
func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64, json.Number:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("a %T", v)
}

// NewKey allocates a fresh key: 128 random bits, printable.
func NewKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "mcpready-" + hex.EncodeToString(b[:])
}

// Ref is the keyed reference of key: what receipts and the store hold.
func (s *Store) Ref(key string) string {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte(key))
	return "hmac-sha256:" + hex.EncodeToString(m.Sum(nil))
}

// principalRef is the keyed reference of a principal's name, kept apart
// from key references.
func (s *Store) principalRef(name string) string {
	m := hmac.New(sha256.New, s.secret)
	m.Write([]byte("principal\x00"))
	m.Write([]byte(name))
	return "hmac-sha256:" + hex.EncodeToString(m.Sum(nil))
}

// Bind binds key to scope, the principal named principal and the
// arguments digest for retention (zero means DefaultRetention), durably,
// unless it is bound already. It returns the binding and whether the call
// is a repeat (same scope, principal and digest). The same key in another
// scope or from another principal is ErrKeyScope, with another digest
// ErrKeyReused; neither changes the binding. A binding that names no
// principal (written before bindings did) is claimed by the first
// principal that repeats it.
func (s *Store) Bind(key, scope, principal, digest string, retention time.Duration) (b Binding, repeat bool, err error) {
	if err := CheckKey(key); err != nil {
		return Binding{}, false, err
	}
	if retention <= 0 {
		retention = DefaultRetention
	}
	ref, pref := s.Ref(key), s.principalRef(principal)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if old, ok := s.m[ref]; ok && old.Expires.After(now) {
		switch {
		case old.Scope != scope:
			return old, false, fmt.Errorf("%w: bound to another tenant class, principal class or tool", ErrKeyScope)
		case old.Principal != "" && old.Principal != pref:
			return old, false, fmt.Errorf("%w: bound to another principal", ErrKeyScope)
		case old.Digest != digest:
			return old, false, fmt.Errorf("%w: first used with other arguments", ErrKeyReused)
		}
		if old.Principal == "" {
			old.Principal = pref
			if err := s.write(old, true); err != nil {
				return Binding{}, false, err
			}
			s.put(old)
		}
		return old, true, nil
	}
	b = Binding{Ref: ref, Scope: scope, Principal: pref, Digest: digest, Expires: now.Add(retention)}
	if err := s.room(callerOf(b), now); err != nil {
		return Binding{}, false, err
	}
	if err := s.write(b, true); err != nil {
		return Binding{}, false, err
	}
	s.put(b)
	return b, false, nil
}

// room returns ErrFull when one more binding of caller would pass a cap,
// after dropping expired bindings (at most once a second: a caller that
// keeps the store full must not make every refusal a sweep). s.mu is held.
func (s *Store) room(caller string, now time.Time) error {
	full := func() bool { return len(s.m) >= s.maxKeys || s.callers[caller] >= s.maxPer }
	if full() && now.Sub(s.swept) >= time.Second {
		s.swept = now
		for ref, b := range s.m {
			if !b.Expires.After(now) {
				s.drop(ref)
			}
		}
	}
	switch {
	case len(s.m) >= s.maxKeys:
		return fmt.Errorf("%w: this host holds %d live idempotency keys, its limit", ErrFull, s.maxKeys)
	case s.callers[caller] >= s.maxPer:
		return fmt.Errorf("%w: this principal holds %d live idempotency keys, its limit", ErrFull, s.maxPer)
	}
	return nil
}

// callerOf is the caller of a binding: the caller part of its scope
// ("<tenant class>;<principal class>", or the principal class; both are
// path-escaped, so the first '/' ends it) and its principal.
func callerOf(b Binding) string {
	c := b.Scope
	if i := strings.IndexByte(c, '/'); i >= 0 {
		c = c[:i]
	}
	return c + " " + b.Principal
}

// put sets b in m, keeping callers counted. s.mu is held (or s is not
// shared yet).
func (s *Store) put(b Binding) {
	s.drop(b.Ref)
	s.m[b.Ref] = b
	s.callers[callerOf(b)]++
}

// drop removes the binding of ref, keeping callers counted.
func (s *Store) drop(ref string) {
	b, ok := s.m[ref]
	if !ok {
		return
	}
	delete(s.m, ref)
	c := callerOf(b)
	if s.callers[c]--; s.callers[c] <= 0 {
		delete(s.callers, c)
	}
}

// Finish records the entry and outcome of a call with the bound key ref,
// written but not synced: a crash may lose it, never the binding itself
// (Bind syncs), so a reused payload is refused after any crash. A ref that
// is not bound (expired meanwhile) is ignored.
func (s *Store) Finish(ref, entry, outcome string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.m[ref]
	if !ok || (b.Entry == entry && b.Outcome == outcome) {
		return nil
	}
	b.Entry, b.Outcome = entry, outcome
	if err := s.write(b, false); err != nil {
		return err
	}
	s.m[ref] = b // same scope and principal: callers unchanged
	return nil
}

// Lookup returns the binding of key, if any and not expired.
func (s *Store) Lookup(key string) (Binding, bool) {
	ref := s.Ref(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.m[ref]
	if !ok || !b.Expires.After(s.now()) {
		return Binding{}, false
	}
	return b, true
}

// write appends b, and syncs when sync is set; s.mu is held.
func (s *Store) write(b Binding, sync bool) error {
	if s.f == nil {
		return fmt.Errorf("%w: closed", ErrStore)
	}
	if s.appends > 1024 && s.appends > 4*len(s.m) {
		if err := s.compact(); err != nil {
			return err
		}
	}
	line, _ := json.Marshal(b)
	_, err := s.w.Write(append(line, '\n'))
	if err == nil {
		err = s.w.Flush()
	}
	if err == nil && sync {
		err = s.f.Sync()
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStore, err)
	}
	s.appends++
	return nil
}

// reservedHeaders are headers a Declaration may not name for the key: the
// connection's own (credentials, framing, MCP session) stay the agent's.
var reservedHeaders = map[string]bool{
	"Authorization": true, "Proxy-Authorization": true, "Cookie": true, "Host": true,
	"Content-Type": true, "Content-Length": true, "Content-Encoding": true, "Transfer-Encoding": true,
	"Connection": true, "Accept": true, "Upgrade": true, "Te": true, "Trailer": true,
}

// HeaderAllowed reports whether name may carry a key: an HTTP token, not
// one of the connection's own headers and not an Mcp- header.
func HeaderAllowed(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	canon := http.CanonicalHeaderKey(name)
	return !reservedHeaders[canon] && !strings.HasPrefix(canon, "Mcp-")
}
