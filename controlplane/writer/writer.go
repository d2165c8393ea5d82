// Package writer is the control plane's one write path into the artifact
// store: it verifies a bundle, then stores it. A TrustPolicy is verified
// against the organisation's root public key and must continue the trust
// chain (see sign/chain.go: TrustPolicy versions are one chain per
// organisation, each naming the one it supersedes), every other kind
// against the active TrustPolicy: the one the chain rule picks from the
// stored ones, by signed version only, as the agent does, and never below
// the newest this Writer has accepted (its high-water mark, kept outside
// etcd: trustmark.go). A rejected write stores nothing and returns the
// verification reason.
//
// Every writer on the control plane goes through a *Writer: the Admin API
// (apply and delete), the registry lifecycle (the suspensions and state
// changes it signs) and aggregation (the passive Evidence it signs). Nothing
// else calls store.Put.
//
// Every refused write is logged (operation, kind, reason, the error; never
// the bundle) and counted in mcpready_controlplane_writes_refused_total by
// operation, kind and reason (the artifact.VersionError or
// sign.VerifyError reason, or the write path's own).
//
// The package never signs anything, never rewrites stored bytes and never
// tells anyone about a write: readers learn of new revisions from the store
// watch.
package writer

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/store"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/sign"
)

// Errors of the write path besides *sign.VerifyError and store errors.
var (
	ErrNoTrustPolicy = errors.New("no TrustPolicy stored yet: apply one signed by the root key first")
	// ErrTrustExpired: the active TrustPolicy no longer verifies (e.g. it
	// expired); only a new root-signed TrustPolicy is accepted.
	ErrTrustExpired = errors.New("the active TrustPolicy no longer verifies")
	ErrWrongKind    = errors.New("kind not accepted here")
	// ErrTombstone: a tombstone that does not name what it deletes
	// consistently.
	ErrTombstone = errors.New("invalid tombstone")
	// ErrNotPermitted: the tombstone's signer may not sign the target kind.
	ErrNotPermitted = errors.New("signer not permitted")
	// ErrDeleted: the target of a tombstone is already deleted.
	ErrDeleted = errors.New("already deleted")
	// ErrConfig: New was given incomplete Options.
	ErrConfig = errors.New("invalid writer options")
)

// Options configures a Writer.
type Options struct {
	// Store is where verified bundles go; required.
	Store *store.Store
	// Root is the organisation's root public key; required.
	Root crypto.PublicKey
	// Now is the clock verification uses; nil means time.Now.
	Now func() time.Time
	// Logger receives one line per stored revision and per refused
	// write; nil discards.
	Logger *slog.Logger
	// Registerer receives mcpready_controlplane_writes_refused_total; nil
	// records nothing.
	Registerer prometheus.Registerer
	// TrustMarkPath is the file, outside etcd, that keeps the TrustPolicy
	// high-water mark across restarts (trustmark.go); "" keeps it for the
	// Writer's lifetime only. A file that cannot be read fails New.
	TrustMarkPath string
	// TrustSeed is a TrustPolicy bundle the operator vouches for (the
	// chain head they applied): verified against Root at New and, when
	// there is no mark or it is newer than the mark, made the mark before
	// anything is read from the store, so that a replica that starts
	// without a mark of its own does not take an older TrustPolicy from
	// etcd on trust (trustmark.go). Nil seeds nothing. A seed that does
	// not verify, or that forks from the mark (same version, another
	// bundle), fails New; an older one leaves the mark as it is.
	TrustSeed []byte
}

// Writer verifies and stores bundles. It is safe for concurrent use.
type Writer struct {
	o       Options
	refused *prometheus.CounterVec

	mu       sync.Mutex
	trust    *sign.Trust
	trustKey string        // the stored TrustPolicies' digests trust was picked from
	mark     sign.TrustRef // the TrustPolicy high-water mark (trustmark.go)
}

// New returns a Writer, or an error wrapping ErrConfig.
func New(o Options) (*Writer, error) {
	if o.Store == nil || o.Root == nil {
		return nil, fmt.Errorf("%w: Store and Root are required", ErrConfig)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	mark, err := readTrustMark(o.TrustMarkPath)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	w := &Writer{o: o, mark: mark, refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcpready_controlplane_writes_refused_total",
		Help: "Writes (apply, delete) the write path refused, by operation, kind and reason (e.g. rollback, expired, key-revoked, tombstone)."}, []string{"op", "kind", "reason"})}
	if err := w.seedMark(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if o.Registerer != nil {
		if err := o.Registerer.Register(w.refused); err != nil {
			return nil, fmt.Errorf("%w: metrics: %w", ErrConfig, err)
		}
	}
	return w, nil
}

// refusal logs and counts a refused write of bundle by op ("apply",
// "delete"); errors that are no refusal (etcd, the context) are neither.
func (w *Writer) refusal(op string, bundle []byte, err error) {
	reason := refusalReason(err)
	if reason == "" {
		return
	}
	kind := "unknown" // the label comes from an unverified bundle: known kinds only
	if o, perr := sign.Peek(bundle); perr == nil && o.Kind.NewSpec() != nil {
		kind = string(o.Kind)
	}
	w.refused.WithLabelValues(op, kind, reason).Inc()
	w.o.Logger.Warn("write refused", "op", op, "kind", kind, "reason", reason, "err", err)
}

// refusalReason is the stable reason of a refused write, or "" when err
// is no refusal.
func refusalReason(err error) string {
	var ve *artifact.VersionError
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrTrustRolledBack): // before the cause of a root-only refusal
		return "trust-rolled-back"
	case errors.As(err, &ve):
		return ve.Reason
	case sign.ReasonOf(err) != "":
		return string(sign.ReasonOf(err))
	}
	for _, r := range []struct {
		err    error
		reason string
	}{
		{sign.ErrTrustChain, "trust-chain"}, {ErrNoTrustPolicy, "no-trust-policy"}, {ErrTrustExpired, "trust-expired"}, {ErrWrongKind, "wrong-kind"},
		{ErrTombstone, "tombstone"}, {ErrNotPermitted, "not-permitted"}, {ErrDeleted, "deleted"}, {store.ErrNotFound, "not-found"},
		{store.ErrTooLarge, "too-large"}, {store.ErrInvalid, "invalid"}, {artifact.ErrUnknownKind, "unknown-kind"},
	} {
		if errors.Is(err, r.err) {
			return r.reason
		}
	}
	return ""
}

// Store is the store the Writer writes to (for reads).
func (w *Writer) Store() *store.Store { return w.o.Store }

// activeTrust returns the Trust of the active TrustPolicy by the chain
// rule (sign.PickTrust over every stored TrustPolicy: the highest signed
// version that verifies against the root key, whatever its name), and the
// reference of the one the rule chose (zero when none is stored). The
// error is ErrNoTrustPolicy when none is stored, and wraps ErrTrustExpired
// when the chosen one no longer verifies (it expired). A choice below the
// high-water mark (or none, when there is a mark) wraps
// ErrTrustRolledBack, and the reference is then the mark's.
func (w *Writer) activeTrust(ctx context.Context) (*sign.Trust, sign.TrustRef, error) {
	recs, _, err := w.o.Store.List(ctx, artifact.KindTrustPolicy)
	if err != nil {
		return nil, sign.TrustRef{}, err
	}
	var bundles [][]byte
	var key strings.Builder
	for _, r := range recs {
		if !r.Deleted {
			bundles = append(bundles, r.Bundle)
			key.WriteString(r.Digest)
		}
	}
	now := w.o.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(bundles) == 0 && w.mark == (sign.TrustRef{}) {
		return nil, sign.TrustRef{}, ErrNoTrustPolicy
	}
	if w.trust != nil && w.trustKey == key.String() {
		exp := w.trust.Policy().Object.Provenance().GetExpiresAt()
		if exp == nil || now.Before(exp.AsTime()) {
			return w.trust, w.trust.Ref(), nil
		}
	}
	t, ref, err := sign.PickTrust(bundles, w.o.Root, now)
	if merr := w.belowMark(ref); merr != nil {
		w.trust, w.trustKey = nil, ""
		return nil, w.mark, merr
	}
	if ref != (sign.TrustRef{}) && !errors.Is(err, sign.ErrTrustChain) {
		if merr := w.raiseMark(ref); merr != nil {
			w.trust, w.trustKey = nil, ""
			return nil, ref, merr
		}
	}
	if err != nil {
		w.trust, w.trustKey = nil, "" // Current reports no trust rather than a stale one
		return nil, ref, fmt.Errorf("%w: %q: %w", ErrTrustExpired, ref.Name, err)
	}
	w.trust, w.trustKey = t, key.String()
	return t, ref, nil
}

// Active loads and returns the active Trust from the store (the chain
// rule over every stored TrustPolicy); the error is ErrNoTrustPolicy or
// wraps ErrTrustExpired when there is none that verifies.
func (w *Writer) Active(ctx context.Context) (*sign.Trust, error) {
	t, _, err := w.activeTrust(ctx)
	return t, err
}

// Current returns the active Trust as last loaded (by a write or Refresh),
// or nil if none is known yet.
func (w *Writer) Current() *sign.Trust {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.trust
}

// Refresh reloads the active TrustPolicy every interval until ctx ends,
// so Current follows writes made through other replicas.
func (w *Writer) Refresh(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, _, err := w.activeTrust(ctx); err != nil && !errors.Is(err, ErrNoTrustPolicy) && ctx.Err() == nil {
			w.o.Logger.Warn("refreshing the active TrustPolicy", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// verify checks bundle against the root key (TrustPolicy) or the active
// TrustPolicy (every other kind). A TrustPolicy must also continue the
// chain: sign.CheckSuccessor against the active one, exactly.
func (w *Writer) verify(ctx context.Context, bundle []byte) (*sign.Verified, error) {
	if max := w.o.Store.MaxBytes(); len(bundle) > max {
		return nil, fmt.Errorf("%w: bundle is %d bytes, limit is %d", store.ErrTooLarge, len(bundle), max)
	}
	now := w.o.Now()
	trust, active, err := w.activeTrust(ctx)
	rootOnly := errors.Is(err, ErrNoTrustPolicy) || errors.Is(err, ErrTrustExpired) || errors.Is(err, ErrTrustRolledBack)
	if err != nil && !rootOnly {
		return nil, err
	}
	if !rootOnly {
		v, verr := trust.Verify(bundle, now)
		if verr != nil {
			return nil, verr
		}
		if v.Object.Kind != artifact.KindTrustPolicy {
			return v, nil
		}
	}
	// A TrustPolicy; or, at bootstrap, when the active TrustPolicy
	// expired or when the store fell below the high-water mark, only a
	// root-signed TrustPolicy can be written (in the last case the mark's
	// own bundle or its successor: active is the mark).
	t, terr := sign.NewTrust(bundle, w.o.Root, now)
	if terr != nil {
		if rootOnly && (sign.ReasonOf(terr) == sign.ReasonUnknownKey || sign.ReasonOf(terr) == sign.ReasonKindNotAllowed) {
			return nil, fmt.Errorf("%w; only a root-signed TrustPolicy is accepted now (%w)", err, terr)
		}
		return nil, terr
	}
	if err := sign.CheckSuccessor(active, active != (sign.TrustRef{}), t, true); err != nil {
		return nil, err
	}
	return t.Policy(), nil
}

// Apply verifies bundle and stores it as the next revision of its artifact.
// unchanged reports a re-apply of the latest revision's exact bytes
// (nothing is written). ReceiptBatch, Tombstone and DriftReport are
// refused with ErrWrongKind.
func (w *Writer) Apply(ctx context.Context, bundle []byte) (rec store.Record, unchanged bool, err error) {
	rec, unchanged, err = w.apply(ctx, bundle, "")
	w.refusal("apply", bundle, err)
	return rec, unchanged, err
}

// apply is Apply, refusing every kind but only when only is set.
func (w *Writer) apply(ctx context.Context, bundle []byte, only artifact.Kind) (rec store.Record, unchanged bool, err error) {
	v, err := w.verify(ctx, bundle)
	if err != nil {
		return store.Record{}, false, err
	}
	if err := artifact.CheckExpiry(v.Object, w.o.Now()); err != nil {
		return store.Record{}, false, err
	}
	if only != "" && v.Object.Kind != only {
		return store.Record{}, false, fmt.Errorf("%w: want a %s, got a %s", ErrWrongKind, only, v.Object.Kind)
	}
	switch v.Object.Kind {
	case artifact.KindReceiptBatch:
		return store.Record{}, false, fmt.Errorf("%w: ReceiptBatch goes to the ReceiptsService", ErrWrongKind)
	case artifact.KindTombstone:
		return store.Record{}, false, fmt.Errorf("%w: a Tombstone is sent with Delete", ErrWrongKind)
	case artifact.KindDriftReport:
		return store.Record{}, false, fmt.Errorf("%w: a DriftReport is sent with ReportDrift", ErrWrongKind)
	}
	floor, err := w.legacyHighWater(ctx, v.Object.Kind, v.Object.Metadata.Name)
	if err != nil {
		return store.Record{}, false, err
	}
	rec, unchanged, err = w.o.Store.Put(ctx, store.Record{Kind: v.Object.Kind, Name: v.Object.Metadata.Name, Bundle: bundle, Signer: v.KeyID, Labels: v.Object.Metadata.Labels,
		Version: v.Object.Version(), HighWater: floor})
	if err != nil {
		return store.Record{}, false, err
	}
	if rec.Kind == artifact.KindTrustPolicy {
		if _, _, err := w.activeTrust(ctx); err != nil {
			w.o.Logger.Warn("loading the new TrustPolicy", "err", err)
		}
	}
	if !unchanged {
		w.o.Logger.Info("artifact stored", "kind", rec.Kind, "name", rec.Name, "revision", rec.Revision, "signer", rec.Signer)
		for _, a := range artifact.Advise(v.Object) {
			w.o.Logger.Warn("stored artifact binds less than it seems to", "kind", rec.Kind, "name", rec.Name, "revision", rec.Revision, "field", "spec."+a.Path, "advice", a.Message)
		}
	}
	return rec, unchanged, nil
}

// legacyHighWater is, for an artifact whose latest revision was stored
// before the store kept high-water marks, the highest signed version in
// its history (read from the stored bundles, which were verified when
// written); "" otherwise. The store uses it only in that case.
func (w *Writer) legacyHighWater(ctx context.Context, k artifact.Kind, name string) (string, error) {
	latest, err := w.o.Store.Get(ctx, k, name)
	if errors.Is(err, store.ErrNotFound) || (err == nil && latest.HighWater != "") {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	hist, err := w.o.Store.History(ctx, k, name)
	if err != nil {
		return "", err
	}
	high := ""
	for _, r := range hist {
		if o, err := sign.Peek(r.Bundle); err == nil && !r.Deleted {
			high = artifact.MaxVersion(high, o.Version())
		}
	}
	return high, nil
}

// Delete verifies a signed Tombstone and stores it as the next revision of
// its target. The tombstone's metadata.name must be its target name, its
// signer must be the root key or granted the target kind, and it must name
// the exact version it deletes (artifact.CheckTombstone), so it deletes
// nothing once that version is superseded: it cannot be replayed.
func (w *Writer) Delete(ctx context.Context, tombstone []byte) (store.Record, error) {
	rec, err := w.delete(ctx, tombstone)
	w.refusal("delete", tombstone, err)
	return rec, err
}

func (w *Writer) delete(ctx context.Context, tombstone []byte) (store.Record, error) {
	v, err := w.verify(ctx, tombstone)
	if err != nil {
		return store.Record{}, err
	}
	if err := artifact.CheckExpiry(v.Object, w.o.Now()); err != nil {
		return store.Record{}, err
	}
	ts, ok := v.Object.Spec.(*mcpreadyv1.Tombstone)
	if !ok {
		return store.Record{}, fmt.Errorf("%w: Delete needs a Tombstone, got a %s", ErrWrongKind, v.Object.Kind)
	}
	target, err := artifact.ParseKind(ts.GetTargetKind())
	if err != nil {
		return store.Record{}, fmt.Errorf("%w: target: %w", ErrTombstone, err)
	}
	if ts.GetTargetName() != v.Object.Metadata.Name {
		return store.Record{}, fmt.Errorf("%w: metadata.name %q must equal target_name %q", ErrTombstone, v.Object.Metadata.Name, ts.GetTargetName())
	}
	if target == artifact.KindTrustPolicy {
		return store.Record{}, fmt.Errorf("%w: a TrustPolicy is never deleted; apply a newer version that supersedes it", ErrWrongKind)
	}
	trust, _, err := w.activeTrust(ctx)
	if err != nil {
		return store.Record{}, err
	}
	if !mayDelete(trust, v.KeyID, target) {
		return store.Record{}, fmt.Errorf("%w: %s: key %s may not sign %s, so it may not delete one", ErrNotPermitted, sign.ReasonKindNotAllowed, v.KeyID, target)
	}
	cur, err := w.o.Store.Get(ctx, target, ts.GetTargetName())
	if err != nil {
		return store.Record{}, err
	}
	if cur.Deleted {
		return store.Record{}, fmt.Errorf("%w: %s %q", ErrDeleted, target, ts.GetTargetName())
	}
	o, err := sign.Peek(cur.Bundle)
	if err != nil {
		return store.Record{}, err
	}
	if err := artifact.CheckTombstone(ts, target, o.Metadata.Name, o.Version(), cur.Digest); err != nil {
		return store.Record{}, fmt.Errorf("%w: %w", ErrTombstone, err)
	}
	rec, _, err := w.o.Store.Put(ctx, store.Record{Kind: target, Name: ts.GetTargetName(), Bundle: tombstone, Signer: v.KeyID, Deleted: true})
	if err != nil {
		return store.Record{}, err
	}
	w.o.Logger.Info("artifact deleted", "kind", rec.Kind, "name", rec.Name, "revision", rec.Revision, "signer", rec.Signer)
	return rec, nil
}

// ApplyEvidence stores a signed Evidence bundle as Apply does and refuses
// every other kind with ErrWrongKind; it makes a Writer the aggregate
// package's EvidenceSink.
func (w *Writer) ApplyEvidence(ctx context.Context, bundle []byte) error {
	_, _, err := w.apply(ctx, bundle, artifact.KindEvidence)
	w.refusal("apply", bundle, err)
	return err
}

// mayDelete reports whether keyID is the root key or granted kind k.
func mayDelete(t *sign.Trust, keyID string, k artifact.Kind) bool {
	if keyID == t.Policy().KeyID {
		return true
	}
	for _, g := range t.Policy().Object.Spec.(*mcpreadyv1.TrustPolicy).GetKeys() {
		if g.GetKeyId() != keyID {
			continue
		}
		for _, gk := range g.GetKinds() {
			if pk, err := artifact.ParseKind(gk); gk == "*" || (err == nil && pk == k) {
				return true
			}
		}
	}
	return false
}
