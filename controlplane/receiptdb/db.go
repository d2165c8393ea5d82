// Package receiptdb is the control plane's receipt store in PostgreSQL (or
// a database speaking its wire protocol), shared by every replica: verified
// receipt batches exactly as signed, one row per receipt for queries, and
// every agent's chain head. Commit stores a batch's receipts and advances
// its agent's head in one transaction whose first statement locks and
// compares the head, so a batch is in the store exactly when it is in the
// chain, and a resend after a lost acknowledgement is a duplicate on every
// replica.
//
// Receipts and batches are partitioned by the day they were received;
// retention drops whole partitions. Heads are not partitioned and outlive
// retention. The schema is versioned (table receipt_schema); Open applies
// missing migrations and refuses a database whose schema is newer than
// this binary knows. Off loopback the connection must use TLS
// (sslmode=require, verify-ca or verify-full).
//
// It must not verify signatures or chains (package ingest does, before
// Commit), alter a batch (bundles and receipts are kept byte for byte as
// signed), or hold more receipts in memory than a query's limit (tails
// and exports read a page at a time).
//
// Files: db.go (open, TLS rule, migrations), commit.go (heads and the
// commit transaction), query.go (queries, tails, exports), partition.go
// (partitions and retention).
package receiptdb

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mcpready/mcpready/internal/loopback"
)

// Sentinel errors.
var (
	// ErrUnavailable: the database did not answer in time or failed.
	ErrUnavailable = errors.New("receipt database unavailable")
	// ErrInsecure: a connection string without TLS to a host off loopback.
	ErrInsecure = errors.New("receipt database connection without TLS off loopback")
	// ErrSchemaNewer: the database's schema is newer than this binary.
	ErrSchemaNewer = errors.New("receipt database schema is newer than this binary")
	// ErrConfig: a connection string that does not parse.
	ErrConfig = errors.New("invalid receipt database connection string")
	// ErrNotFound: no receipt with that id.
	ErrNotFound = errors.New("receipt not found")
	// ErrCorrupt: a stored row that does not decode.
	ErrCorrupt = errors.New("receipt database row corrupt")
)

// Options configures a DB. Zero values take the defaults.
type Options struct {
	// Retention drops whole daily partitions received longer ago than
	// this (see ApplyRetention); zero keeps everything.
	Retention time.Duration
	// Timeout bounds one call; 0 means 5s.
	Timeout time.Duration
	// MaxConns bounds the connection pool; 0 means 8.
	MaxConns int32
	// PollEvery is how often a following tail looks for new receipts;
	// 0 means 250ms.
	PollEvery time.Duration
	// Logger; nil discards. Receipts are never logged.
	Logger *slog.Logger
	// Now; default time.Now.
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.MaxConns <= 0 {
		o.MaxConns = 8
	}
	if o.PollEvery <= 0 {
		o.PollEvery = 250 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// DB is the receipt database, safe for concurrent use.
type DB struct {
	o    Options
	log  *slog.Logger
	pool *pgxpool.Pool

	partMu sync.Mutex
	parts  map[string]bool // days whose partitions exist
}

// IsDSN reports whether s is a PostgreSQL connection URL (the form
// --receipts-store takes).
func IsDSN(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// ParseConfig parses a connection string and applies the TLS rule: every
// host off loopback (and not a Unix socket) must be reached with TLS only.
func ParseConfig(dsn string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's error text may echo the password: never return it.
		if strings.Contains(err.Error(), "sslrootcert") || strings.Contains(err.Error(), "sslcert") || strings.Contains(err.Error(), "sslkey") {
			return nil, fmt.Errorf("%w: a TLS file it names (sslrootcert, sslcert or sslkey) cannot be read", ErrConfig)
		}
		return nil, fmt.Errorf("%w: it does not parse", ErrConfig)
	}
	cc := cfg.ConnConfig
	targets := append([]*pgconn.FallbackConfig{{Host: cc.Host, Port: cc.Port, TLSConfig: cc.TLSConfig}}, cc.Fallbacks...)
	for _, f := range targets {
		if strings.HasPrefix(f.Host, "/") || loopback.Is(net.JoinHostPort(f.Host, strconv.Itoa(int(f.Port)))) {
			continue
		}
		if f.TLSConfig == nil {
			return nil, fmt.Errorf("%w: host %s needs sslmode=verify-full (or require)", ErrInsecure, f.Host)
		}
	}
	return cfg, nil
}

// Open connects, applies missing migrations and creates the current
// partitions. It refuses a newer schema (ErrSchemaNewer) and fails with
// ErrUnavailable when the database cannot be reached within Timeout.
func Open(ctx context.Context, dsn string, o Options) (*DB, error) {
	o = o.withDefaults()
	cfg, err := ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = o.MaxConns
	cfg.ConnConfig.ConnectTimeout = o.Timeout
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	d := &DB{o: o, log: o.Logger.With("component", "receiptdb"), pool: pool, parts: map[string]bool{}}
	if err := d.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	now := o.Now()
	for _, day := range []time.Time{now, now.Add(24 * time.Hour)} {
		if err := d.ensurePartition(ctx, day); err != nil {
			pool.Close()
			return nil, err
		}
	}
	return d, nil
}

// Close closes the pool.
func (d *DB) Close() error {
	d.pool.Close()
	return nil
}

// timeout bounds one call.
func (d *DB) timeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d.o.Timeout)
}

// fail classifies a database error: this package's own errors pass
// through; a server-side SQL error keeps its message and SQLSTATE (never
// the statement's data); anything else (connection, timeout, the server
// shutting down or out of resources) is ErrUnavailable.
func fail(err error) error {
	for _, own := range []error{ErrSchemaNewer, ErrConflict, ErrInvalid, ErrCorrupt, ErrNotFound, ErrUnavailable} {
		if errors.Is(err, own) {
			return err
		}
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && !strings.HasPrefix(pe.Code, "08") && !strings.HasPrefix(pe.Code, "57") && !strings.HasPrefix(pe.Code, "53") {
		return fmt.Errorf("receiptdb: %s (SQLSTATE %s)", pe.Message, pe.Code)
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// inTx runs fn in one transaction bounded by Timeout; errors are
// classified by fail.
func (d *DB) inTx(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
	ctx, cancel := d.timeout(ctx)
	defer cancel()
	if err := pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error { return fn(ctx, tx) }); err != nil {
		return fail(err)
	}
	return nil
}

// migrations are applied in order; migration i brings the schema to
// version i+1. Never edit one that has shipped: append.
var migrations = []string{
	`CREATE TABLE receipt_heads (
		agent_id text PRIMARY KEY,
		sequence bigint NOT NULL,
		digest   text NOT NULL,
		version  bigint NOT NULL
	);
	CREATE TABLE receipt_batches (
		received timestamptz NOT NULL,
		agent_id text NOT NULL,
		sequence bigint NOT NULL,
		batch_id text NOT NULL,
		digest   text NOT NULL,
		bundle   bytea NOT NULL,
		receipts integer NOT NULL,
		tx       xid8 NOT NULL DEFAULT pg_current_xact_id()
	) PARTITION BY RANGE (received);
	CREATE INDEX receipt_batches_agent ON receipt_batches (agent_id, sequence);
	CREATE INDEX receipt_batches_tx ON receipt_batches (tx);
	CREATE TABLE receipts (
		received    timestamptz NOT NULL,
		tx          xid8 NOT NULL DEFAULT pg_current_xact_id(),
		idx         integer NOT NULL,
		agent_id    text NOT NULL,
		batch_id    text NOT NULL,
		receipt_id  text NOT NULL,
		workflow_id text NOT NULL,
		server_name text NOT NULL,
		tool_name   text NOT NULL,
		emitted_at  timestamptz,
		digest      text NOT NULL,
		body        bytea NOT NULL
	) PARTITION BY RANGE (received);
	CREATE INDEX receipts_id ON receipts (receipt_id);
	CREATE INDEX receipts_workflow ON receipts (workflow_id) WHERE workflow_id <> '';
	CREATE INDEX receipts_subject ON receipts (server_name, tool_name, emitted_at);
	CREATE INDEX receipts_order ON receipts (tx, idx);`,
}

// SchemaVersion is the schema version this binary writes.
var SchemaVersion = len(migrations)

// migrate applies missing migrations under an advisory lock, so replicas
// starting together apply each once.
func (d *DB) migrate(ctx context.Context) error {
	return d.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(7240160001)`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS receipt_schema (version integer NOT NULL)`); err != nil {
			return err
		}
		var v int
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM receipt_schema`).Scan(&v); err != nil {
			return err
		}
		if v > SchemaVersion {
			return fmt.Errorf("%w: database is at version %d, this binary knows %d", ErrSchemaNewer, v, SchemaVersion)
		}
		for i := v; i < SchemaVersion; i++ {
			if _, err := tx.Exec(ctx, migrations[i]); err != nil {
				return fmt.Errorf("migration %d: %w", i+1, err)
			}
			d.log.Info("receipt database migrated", "version", i+1)
		}
		if v == SchemaVersion {
			return nil
		}
		_, err := tx.Exec(ctx, `DELETE FROM receipt_schema; INSERT INTO receipt_schema (version) VALUES (`+strconv.Itoa(SchemaVersion)+`)`)
		return err
	})
}
