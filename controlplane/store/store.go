// Package store keeps signed artifacts and lifecycle events in etcd.
//
// Key layout (version 1, under Options.Prefix, default "/mcpready/v1"):
//
//	<p>/artifacts/<kind>/<name>/<revision, 20 digits>  the bundle bytes exactly as applied
//	<p>/meta/<kind>/<name>/<revision, 20 digits>       JSON Record metadata of that revision
//	<p>/latest/<kind>/<name>                            JSON Record metadata of the latest revision
//	<p>/events/<stream>/<name>/<seq, 20 digits>         opaque event bytes (append-only)
//
// A revision is written in one transaction that only succeeds if the
// revision key does not exist yet and the latest pointer is unchanged since
// it was read, so history is append-only and never partially written.
// The same transaction enforces rollback protection: each artifact's
// latest metadata carries the highest signed version it has had
// (Record.HighWater, kept across deletions), and a revision whose Version
// (as the writer read it from the verified bundle) is not above it is
// refused with artifact.CheckNewer's error, so two writers racing cannot
// both pass the check.
//
// The store must not verify signatures or interpret bundles (it compares
// the Version its caller states, never one it reads itself): the one
// caller of Put for artifacts is package writer, which verifies first. It
// never deletes or rewrites a revision. Readers learn of new revisions
// through Watch (kinds changed) and WatchRecords (the records themselves).
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcpready/mcpready/artifact"
)

// Sentinel errors.
var (
	ErrNotFound    = errors.New("not found")
	ErrTooLarge    = errors.New("artifact too large")
	ErrConflict    = errors.New("concurrent write conflict")
	ErrUnavailable = errors.New("etcd unavailable")
	ErrInvalid     = errors.New("invalid record")
)

// DefaultMaxBytes is the default largest bundle accepted (1 MiB), below
// etcd's default 1.5 MiB request limit so that a revision's transaction fits.
const DefaultMaxBytes = 1 << 20

// hardMaxBytes keeps a revision's transaction under etcd's request limit.
const hardMaxBytes = 1400 * 1024

// MaxTxnOps is etcd's default limit of operations per transaction.
const MaxTxnOps = 128

// Record is one stored revision of an artifact.
type Record struct {
	Kind     artifact.Kind     `json:"kind"`
	Name     string            `json:"name"`
	Revision int64             `json:"revision"`
	Digest   string            `json:"digest"`
	Signer   string            `json:"signer,omitempty"`
	StoredAt time.Time         `json:"storedAt"`
	Deleted  bool              `json:"deleted,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	// Version is the artifact's signed provenance.version as the writer
	// read it from the verified bundle ("" for a deletion).
	Version string `json:"version,omitempty"`
	// HighWater is the highest Version any revision of this artifact has
	// had, carried across deletions: Put refuses a revision whose Version
	// is not above it (artifact.CheckNewer). Set by Put. On a Record given
	// to Put it is the floor to use when the latest stored revision has no
	// mark (it was stored before marks existed); it is ignored otherwise.
	HighWater string `json:"highWater,omitempty"`
	// Bundle is the exact bytes applied (for a deletion: the tombstone).
	Bundle []byte `json:"-"`
	// ModRevision is the etcd revision at which this record became latest.
	ModRevision int64 `json:"-"`
}

// Options configures a Store. The zero value is usable.
type Options struct {
	// Prefix of every key; "" means "/mcpready/v1".
	Prefix string
	// MaxBytes is the largest bundle accepted; 0 means DefaultMaxBytes.
	MaxBytes int
	// Attempts is how often an operation is tried while etcd is
	// unavailable; 0 means 5.
	Attempts int
	// Backoff is the first retry delay, doubled each time up to 2s; 0 means 100ms.
	Backoff time.Duration
	// AttemptTimeout bounds one attempt; 0 means 2s.
	AttemptTimeout time.Duration
	// OnError, if set, is called for every failed etcd operation (for metrics).
	OnError func(error)
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

// Store is an artifact store on etcd. It is safe for concurrent use.
type Store struct {
	cli *clientv3.Client
	o   Options
}

// New returns a Store using cli.
func New(cli *clientv3.Client, o Options) *Store {
	if o.Prefix == "" {
		o.Prefix = "/mcpready/v1"
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxBytes > hardMaxBytes {
		o.MaxBytes = hardMaxBytes
	}
	if o.Attempts <= 0 {
		o.Attempts = 5
	}
	if o.Backoff <= 0 {
		o.Backoff = 100 * time.Millisecond
	}
	if o.AttemptTimeout <= 0 {
		o.AttemptTimeout = 2 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Store{cli: cli, o: o}
}

// MaxBytes is the largest bundle Put accepts.
func (s *Store) MaxBytes() int { return s.o.MaxBytes }

func pad(n int64) string { return fmt.Sprintf("%020d", n) }

func (s *Store) artifactKey(k artifact.Kind, name string, rev int64) string {
	return s.o.Prefix + "/artifacts/" + string(k) + "/" + name + "/" + pad(rev)
}
func (s *Store) metaKey(k artifact.Kind, name string, rev int64) string {
	return s.o.Prefix + "/meta/" + string(k) + "/" + name + "/" + pad(rev)
}
func (s *Store) latestKey(k artifact.Kind, name string) string {
	return s.o.Prefix + "/latest/" + string(k) + "/" + name
}
func (s *Store) latestPrefix(k artifact.Kind) string {
	return s.o.Prefix + "/latest/" + string(k) + "/"
}

// Put stores rec.Bundle as the next revision of (rec.Kind, rec.Name) with
// rec's Signer, Deleted, Labels and Version. If the latest revision has the
// same digest and deletion state, nothing is written and unchanged is true.
// Otherwise a revision that is not a deletion must carry a Version above the
// artifact's high-water mark, checked in the same transaction that writes
// it (an *artifact.VersionError matching artifact.ErrRollback when not).
func (s *Store) Put(ctx context.Context, rec Record) (stored Record, unchanged bool, err error) {
	if _, err := artifact.ParseKind(string(rec.Kind)); err != nil {
		return Record{}, false, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := artifact.ValidateName(rec.Name); err != nil {
		return Record{}, false, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if len(rec.Bundle) == 0 {
		return Record{}, false, fmt.Errorf("%w: empty bundle", ErrInvalid)
	}
	if len(rec.Bundle) > s.o.MaxBytes {
		return Record{}, false, fmt.Errorf("%w: %s %q is %d bytes, limit is %d", ErrTooLarge, rec.Kind, rec.Name, len(rec.Bundle), s.o.MaxBytes)
	}
	rec.Digest = artifact.Digest(rec.Bundle)
	for try := 0; try < 8; try++ {
		latest, mod, err := s.latest(ctx, rec.Kind, rec.Name)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return Record{}, false, err
		}
		if err == nil && latest.Digest == rec.Digest && latest.Deleted == rec.Deleted {
			latest.Bundle = rec.Bundle
			return latest, true, nil
		}
		held := latest.HighWater
		if held == "" && mod != 0 {
			held = rec.HighWater
		}
		next := rec
		next.HighWater = held
		if !rec.Deleted {
			if err := artifact.CheckNewer(rec.Kind, rec.Name, rec.Version, rec.Digest, held, "", mod != 0); err != nil {
				return Record{}, false, err
			}
			next.HighWater = artifact.MaxVersion(held, rec.Version)
		}
		next.Revision = latest.Revision + 1
		next.StoredAt = s.o.Now().UTC()
		meta, err := json.Marshal(next)
		if err != nil {
			return Record{}, false, err
		}
		ak := s.artifactKey(rec.Kind, rec.Name, next.Revision)
		lk := s.latestKey(rec.Kind, rec.Name)
		var resp *clientv3.TxnResponse
		err = s.do(ctx, func(ctx context.Context) error {
			var err error
			resp, err = s.cli.Txn(ctx).If(
				clientv3.Compare(clientv3.CreateRevision(ak), "=", 0),
				clientv3.Compare(clientv3.ModRevision(lk), "=", mod),
			).Then(
				clientv3.OpPut(ak, string(rec.Bundle)),
				clientv3.OpPut(s.metaKey(rec.Kind, rec.Name, next.Revision), string(meta)),
				clientv3.OpPut(lk, string(meta)),
			).Commit()
			return err
		})
		if err != nil {
			return Record{}, false, err
		}
		if resp.Succeeded {
			next.ModRevision = resp.Header.Revision
			return next, false, nil
		}
	}
	return Record{}, false, fmt.Errorf("%w: %s %q changed repeatedly while writing", ErrConflict, rec.Kind, rec.Name)
}

// latest returns the latest record's metadata (no bundle) and the latest
// key's mod revision, or ErrNotFound with mod 0.
func (s *Store) latest(ctx context.Context, k artifact.Kind, name string) (Record, int64, error) {
	var resp *clientv3.GetResponse
	err := s.do(ctx, func(ctx context.Context) error {
		var err error
		resp, err = s.cli.Get(ctx, s.latestKey(k, name))
		return err
	})
	if err != nil {
		return Record{}, 0, err
	}
	if len(resp.Kvs) == 0 {
		return Record{}, 0, fmt.Errorf("%w: %s %q", ErrNotFound, k, name)
	}
	var r Record
	if err := json.Unmarshal(resp.Kvs[0].Value, &r); err != nil {
		return Record{}, 0, fmt.Errorf("%w: latest of %s %q: %w", ErrInvalid, k, name, err)
	}
	r.ModRevision = resp.Kvs[0].ModRevision
	return r, r.ModRevision, nil
}

// Get returns the latest revision of (k, name) with its bundle. A deleted
// artifact is returned with Deleted set.
func (s *Store) Get(ctx context.Context, k artifact.Kind, name string) (Record, error) {
	recs, _, err := s.list(ctx, s.latestKey(k, name), false)
	if err != nil {
		return Record{}, err
	}
	if len(recs) == 0 {
		return Record{}, fmt.Errorf("%w: %s %q", ErrNotFound, k, name)
	}
	return recs[0], nil
}

// List returns the latest revision of every artifact of kind k, sorted by
// name, with bundles, and the etcd revision the listing was read at.
// Deleted artifacts are included (Deleted set); callers filter.
func (s *Store) List(ctx context.Context, k artifact.Kind) ([]Record, int64, error) {
	return s.list(ctx, s.latestPrefix(k), true)
}

func (s *Store) list(ctx context.Context, key string, prefix bool) ([]Record, int64, error) {
	var resp *clientv3.GetResponse
	err := s.do(ctx, func(ctx context.Context) error {
		var err error
		opts := []clientv3.OpOption{clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend)}
		if prefix {
			opts = append(opts, clientv3.WithPrefix())
		}
		resp, err = s.cli.Get(ctx, key, opts...)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	rev := resp.Header.Revision
	recs := make([]Record, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var r Record
		if err := json.Unmarshal(kv.Value, &r); err != nil {
			return nil, 0, fmt.Errorf("%w: %s: %w", ErrInvalid, kv.Key, err)
		}
		r.ModRevision = kv.ModRevision
		recs = append(recs, r)
	}
	keys := make([]string, len(recs))
	for i, r := range recs {
		keys[i] = s.artifactKey(r.Kind, r.Name, r.Revision)
	}
	bundles, err := s.getMany(ctx, keys, rev)
	if err != nil {
		return nil, 0, err
	}
	for i := range recs {
		recs[i].Bundle = bundles[i]
	}
	return recs, rev, nil
}

// getMany reads keys at etcd revision rev in transactions of at most
// MaxTxnOps gets each.
func (s *Store) getMany(ctx context.Context, keys []string, rev int64) ([][]byte, error) {
	out := make([][]byte, len(keys))
	for start := 0; start < len(keys); start += MaxTxnOps {
		end := min(start+MaxTxnOps, len(keys))
		ops := make([]clientv3.Op, 0, end-start)
		for _, k := range keys[start:end] {
			ops = append(ops, clientv3.OpGet(k, clientv3.WithRev(rev)))
		}
		var resp *clientv3.TxnResponse
		err := s.do(ctx, func(ctx context.Context) error {
			var err error
			resp, err = s.cli.Txn(ctx).Then(ops...).Commit()
			return err
		})
		if err != nil {
			return nil, err
		}
		for i, r := range resp.Responses {
			kvs := r.GetResponseRange().GetKvs()
			if len(kvs) == 0 {
				return nil, fmt.Errorf("%w: missing bundle %s", ErrInvalid, keys[start+i])
			}
			out[start+i] = kvs[0].Value
		}
	}
	return out, nil
}

// History returns every revision of (k, name), oldest first, with bundles.
func (s *Store) History(ctx context.Context, k artifact.Kind, name string) ([]Record, error) {
	p := s.o.Prefix + "/meta/" + string(k) + "/" + name + "/"
	resp, err := s.getPrefix(ctx, p)
	if err != nil {
		return nil, err
	}
	var recs []Record
	var keys []string
	for _, kv := range resp.Kvs {
		rest := strings.TrimPrefix(string(kv.Key), p)
		if len(rest) != 20 || strings.Contains(rest, "/") { // a longer name sharing the prefix
			continue
		}
		var r Record
		if err := json.Unmarshal(kv.Value, &r); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, kv.Key, err)
		}
		r.ModRevision = kv.ModRevision
		recs = append(recs, r)
		keys = append(keys, s.artifactKey(k, name, r.Revision))
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("%w: %s %q", ErrNotFound, k, name)
	}
	bundles, err := s.getMany(ctx, keys, resp.Header.Revision)
	if err != nil {
		return nil, err
	}
	for i := range recs {
		recs[i].Bundle = bundles[i]
	}
	return recs, nil
}

// AppendEvent appends data to the event stream (stream, name). Events are
// never rewritten; the key is only created if absent.
func (s *Store) AppendEvent(ctx context.Context, stream, name string, data []byte) error {
	for try := 0; try < 8; try++ {
		created, err := s.CreateEvent(ctx, stream, name, s.o.Now().UnixNano()+int64(try), data)
		if err != nil || created {
			return err
		}
	}
	return fmt.Errorf("%w: event key collision", ErrConflict)
}

// CreateEvent writes data as event seq of (stream, name) unless that event
// exists; created reports whether it was written. Events keyed by a number
// the caller chooses (e.g. a revision) are claimed at most once this way.
// Events sort by seq, so a stream should use one kind of seq.
func (s *Store) CreateEvent(ctx context.Context, stream, name string, seq int64, data []byte) (created bool, err error) {
	if err := artifact.ValidateName(name); err != nil {
		return false, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if len(data) > s.o.MaxBytes {
		return false, fmt.Errorf("%w: event of %d bytes", ErrTooLarge, len(data))
	}
	key := s.o.Prefix + "/events/" + stream + "/" + name + "/" + pad(seq)
	var resp *clientv3.TxnResponse
	err = s.do(ctx, func(ctx context.Context) error {
		var err error
		resp, err = s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, string(data))).Commit()
		return err
	})
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

// Events returns the events of (stream, name), oldest first.
func (s *Store) Events(ctx context.Context, stream, name string) ([][]byte, error) {
	p := s.o.Prefix + "/events/" + stream + "/" + name + "/"
	resp, err := s.getPrefix(ctx, p)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for _, kv := range resp.Kvs {
		rest := strings.TrimPrefix(string(kv.Key), p)
		if _, err := strconv.ParseInt(rest, 10, 64); err != nil || len(rest) != 20 {
			continue
		}
		out = append(out, kv.Value)
	}
	return out, nil
}

// getPrefix reads every key under p in key order. Keys are revision or
// sequence numbers of fixed width, so key order is time order.
func (s *Store) getPrefix(ctx context.Context, p string) (*clientv3.GetResponse, error) {
	var resp *clientv3.GetResponse
	err := s.do(ctx, func(ctx context.Context) error {
		var err error
		resp, err = s.cli.Get(ctx, p, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
		return err
	})
	return resp, err
}

// do runs op with a per-attempt timeout, retrying with exponential backoff
// while etcd is unavailable. Other errors return at once.
func (s *Store) do(ctx context.Context, op func(context.Context) error) error {
	delay := s.o.Backoff
	var last error
	for attempt := 0; attempt < s.o.Attempts; attempt++ {
		actx, cancel := context.WithTimeout(ctx, s.o.AttemptTimeout)
		err := op(actx)
		cancel()
		if err == nil {
			return nil
		}
		if s.o.OnError != nil {
			s.o.OnError(err)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
		}
		if !retryable(err) {
			return fmt.Errorf("etcd: %w", err)
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(delay*2, 2*time.Second)
	}
	return fmt.Errorf("%w after %d attempts: %w", ErrUnavailable, s.o.Attempts, last)
}

func retryable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Aborted, codes.ResourceExhausted:
		return true
	}
	// etcd client errors such as "etcdserver: leader changed" or "no leader".
	msg := err.Error()
	return strings.Contains(msg, "leader") || strings.Contains(msg, "timed out") || strings.Contains(msg, "unavailable")
}
