// Package chainhead keeps every agent's receipt chain head, the one
// place a control-plane replica learns where an agent's chain stands.
// Store keeps heads in etcd, so that any replica can continue any agent's
// chain: an agent whose connection moves to another replica is not refused
// as a gap. Memory keeps them in this process under the same contract, for
// tests and a single replica; package ingest runs the same code with
// either.
//
// Key layout (under Options.Prefix, default "/mcpready/v1"; <agent> is the
// agent id path-escaped, so it never contains "/"):
//
//	<p>/receipts/heads/<agent>                    JSON {"sequence":N,"digest":"sha256:..."}: the last accepted batch
//	<p>/receipts/batches/<agent>/<seq, 20 digits>  the bundle digest of the accepted batch at seq
//
// The head only moves by Advance: one transaction that compares the head
// key's mod revision (or that it is absent) with the version the caller
// read and puts the new head and the batch digest together, so two
// replicas racing on one sequence never both win; the loser gets
// ErrConflict and the current state to re-check against.
//
// Digest keys are bounded by count, not age: Advance to sequence s deletes
// the key at s-Keep in the same transaction, so each agent keeps its last
// Keep digests. That is enough to tell a resend from a fork: an agent only
// resends batches it has no acknowledgement for, acknowledgements arrive in
// order and the shipper has at most its window (default 8) in flight, so a
// resend lags the head by at most that window, far below DefaultKeep. A
// resend older than that is refused as a replay (never accepted), which is
// the safe side.
//
// Both must not judge batches: it does not verify signatures, check
// prev_batch_digest or store receipts (the caller does, package ingest);
// it only stores heads and digests and refuses a head that does not
// directly follow the one compared. It makes one attempt per call, bounded
// by Options.Timeout, and does not retry: the agent keeps a refused batch
// and resends it with its own backoff.
package chainhead

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mcpready/mcpready/ledger"
)

// Sentinel errors.
var (
	// ErrConflict: the head moved since it was read (another replica won).
	ErrConflict = errors.New("chain head moved concurrently")
	// ErrUnavailable: etcd did not answer in time or failed.
	ErrUnavailable = errors.New("chain head store unavailable")
	// ErrInvalid: an Advance that does not directly follow its base.
	ErrInvalid = errors.New("invalid chain head advance")
	// ErrCorrupt: a stored head does not decode.
	ErrCorrupt = errors.New("stored chain head corrupt")
)

// DefaultKeep is how many accepted batch digests are kept per agent.
const DefaultKeep = 1024

// Options configures a Store. The zero value is usable.
type Options struct {
	// Prefix of every key; "" means "/mcpready/v1" (as package store).
	Prefix string
	// Keep is how many batch digests are kept per agent; 0 means DefaultKeep.
	Keep int
	// Timeout bounds one call; 0 means 2s.
	Timeout time.Duration
	// OnError, if set, is called for every failed etcd operation (metrics).
	OnError func(error)
}

// State is an agent's shared head and the version it was read at (the
// head key's mod revision; 0 means no head is stored yet).
type State struct {
	ledger.Head
	Version int64
}

// Store keeps chain heads in etcd. It is safe for concurrent use.
type Store struct {
	cli *clientv3.Client
	o   Options
}

// New returns a Store using cli.
func New(cli *clientv3.Client, o Options) *Store {
	return &Store{cli: cli, o: o.withDefaults()}
}

func (o Options) withDefaults() Options {
	if o.Prefix == "" {
		o.Prefix = "/mcpready/v1"
	}
	if o.Keep <= 0 {
		o.Keep = DefaultKeep
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Second
	}
	return o
}

// checkAdvance refuses an Advance whose next head does not directly
// follow base.
func checkAdvance(base State, next ledger.Head) error {
	if next.Sequence != base.Sequence+1 || next.Digest == "" {
		return fmt.Errorf("%w: sequence %d after %d", ErrInvalid, next.Sequence, base.Sequence)
	}
	return nil
}

func (s *Store) headKey(agent string) string {
	return s.o.Prefix + "/receipts/heads/" + url.PathEscape(agent)
}

func (s *Store) batchKey(agent string, seq uint64) string {
	return fmt.Sprintf("%s/receipts/batches/%s/%020d", s.o.Prefix, url.PathEscape(agent), seq)
}

type headValue struct {
	Sequence uint64 `json:"sequence"`
	Digest   string `json:"digest"`
}

func (s *Store) fail(err error) error {
	if s.o.OnError != nil {
		s.o.OnError(err)
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

func decodeHead(key string, v []byte, modRev int64) (State, error) {
	var h headValue
	if err := json.Unmarshal(v, &h); err != nil || h.Sequence == 0 || h.Digest == "" {
		return State{}, fmt.Errorf("%w: %s", ErrCorrupt, key)
	}
	return State{Head: ledger.Head{Sequence: h.Sequence, Digest: h.Digest}, Version: modRev}, nil
}

// Get returns agent's head; the zero State if none is stored.
func (s *Store) Get(ctx context.Context, agent string) (State, error) {
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	key := s.headKey(agent)
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return State{}, s.fail(err)
	}
	if len(resp.Kvs) == 0 {
		return State{}, nil
	}
	return decodeHead(key, resp.Kvs[0].Value, resp.Kvs[0].ModRevision)
}

// BatchDigest returns the digest of agent's accepted batch at seq, if it
// is still kept.
func (s *Store) BatchDigest(ctx context.Context, agent string, seq uint64) (string, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	resp, err := s.cli.Get(ctx, s.batchKey(agent, seq))
	if err != nil {
		return "", false, s.fail(err)
	}
	if len(resp.Kvs) == 0 {
		return "", false, nil
	}
	return string(resp.Kvs[0].Value), true, nil
}

// Advance moves agent's head from base (as read by Get, or a head seeded
// from elsewhere with Version 0) to next, which must be the batch at
// base.Sequence+1, and records next's digest, in one transaction. If the
// head changed since base was read (or base.Version is 0 and a head now
// exists), nothing is written and it returns the current state with
// ErrConflict.
func (s *Store) Advance(ctx context.Context, agent string, base State, next ledger.Head) (State, error) {
	if err := checkAdvance(base, next); err != nil {
		return State{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	key := s.headKey(agent)
	v, err := json.Marshal(headValue{Sequence: next.Sequence, Digest: next.Digest})
	if err != nil {
		return State{}, err
	}
	cmp := clientv3.Compare(clientv3.ModRevision(key), "=", base.Version)
	if base.Version == 0 {
		cmp = clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	}
	ops := []clientv3.Op{clientv3.OpPut(key, string(v)), clientv3.OpPut(s.batchKey(agent, next.Sequence), next.Digest)}
	if keep := uint64(s.o.Keep); next.Sequence > keep {
		ops = append(ops, clientv3.OpDelete(s.batchKey(agent, next.Sequence-keep)))
	}
	resp, err := s.cli.Txn(ctx).If(cmp).Then(ops...).Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return State{}, s.fail(err)
	}
	if resp.Succeeded {
		return State{Head: next, Version: resp.Header.Revision}, nil
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return State{}, ErrConflict
	}
	cur, err := decodeHead(key, kvs[0].Value, kvs[0].ModRevision)
	if err != nil {
		return State{}, err
	}
	return cur, ErrConflict
}
