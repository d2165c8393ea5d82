// Package admin implements the AdminService: the only write path into the
// artifact store. Every bundle is verified before anything is stored: a
// TrustPolicy against the root public key given at start-up, every other
// kind against the active TrustPolicy (the most recently stored one). A
// rejected write stores nothing and answers with the verification reason.
//
// Stored bundles are kept byte-for-byte and history is append-only;
// deletion is a signed Tombstone stored as a new revision. Registry status
// and drift reports are delegated to a Lifecycle.
//
// The package never signs anything and never rewrites stored bytes.
package admin

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/store"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/sign"
)

// Lifecycle is the registry lifecycle the service delegates to.
type Lifecycle interface {
	// Applied is told about every newly stored revision (not about
	// unchanged re-applies).
	Applied(ctx context.Context, rec store.Record, obj *artifact.Object)
	Status(ctx context.Context, name string) ([]*mcpreadyv1.RegistryStatus, error)
	ReportDrift(ctx context.Context, req *mcpreadyv1.ReportDriftRequest) (*mcpreadyv1.ReportDriftResponse, error)
}

// Options configures a Service.
type Options struct {
	// Store is required.
	Store *store.Store
	// Root is the organisation's root public key; required.
	Root crypto.PublicKey
	// Lifecycle may be set later with SetLifecycle; nil makes
	// RegistryStatus and ReportDrift answer Unimplemented.
	Lifecycle Lifecycle
	// Now; nil means time.Now.
	Now func() time.Time
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// Service implements mcpreadyv1.AdminServiceServer.
type Service struct {
	mcpreadyv1.UnimplementedAdminServiceServer
	o Options

	mu        sync.Mutex
	lifecycle Lifecycle
	trust     *sign.Trust
	trustDig  string
}

// New returns a Service.
func New(o Options) *Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Service{o: o, lifecycle: o.Lifecycle}
}

// SetLifecycle sets the lifecycle (it usually needs the Service's
// ApplyBundle, so it is built after the Service).
func (s *Service) SetLifecycle(l Lifecycle) {
	s.mu.Lock()
	s.lifecycle = l
	s.mu.Unlock()
}

func (s *Service) lc() Lifecycle {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lifecycle
}

// Errors of the write path besides *sign.VerifyError and store errors.
var (
	ErrNoTrustPolicy = errors.New("no TrustPolicy stored yet: apply one signed by the root key first")
	// ErrTrustExpired: the active TrustPolicy no longer verifies (e.g. it
	// expired); only a new root-signed TrustPolicy is accepted.
	ErrTrustExpired = errors.New("the active TrustPolicy no longer verifies")
	ErrWrongKind    = errors.New("kind not accepted here")
)

// activeTrust returns the Trust of the latest stored TrustPolicy, or
// ErrNoTrustPolicy.
func (s *Service) activeTrust(ctx context.Context) (*sign.Trust, error) {
	recs, _, err := s.o.Store.List(ctx, artifact.KindTrustPolicy)
	if err != nil {
		return nil, err
	}
	var latest *store.Record
	for i := range recs {
		if !recs[i].Deleted && (latest == nil || recs[i].ModRevision > latest.ModRevision) {
			latest = &recs[i]
		}
	}
	if latest == nil {
		return nil, ErrNoTrustPolicy
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.trustDig == latest.Digest {
		exp := s.trust.Policy().Object.Spec.(*mcpreadyv1.TrustPolicy).GetProvenance().GetExpiresAt()
		if exp == nil || s.o.Now().Before(exp.AsTime()) {
			return s.trust, nil
		}
	}
	t, err := sign.NewTrust(latest.Bundle, s.o.Root, s.o.Now())
	if err != nil {
		s.trust, s.trustDig = nil, "" // Current reports no trust rather than a stale one
		return nil, fmt.Errorf("%w: %q: %w", ErrTrustExpired, latest.Name, err)
	}
	s.trust, s.trustDig = t, latest.Digest
	return t, nil
}

// Current returns the active Trust as last loaded (by a write or Refresh),
// or nil if none is known yet.
func (s *Service) Current() *sign.Trust {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.trust
}

// Refresh reloads the active TrustPolicy every interval until ctx ends,
// so Current follows writes made through other replicas.
func (s *Service) Refresh(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := s.activeTrust(ctx); err != nil && !errors.Is(err, ErrNoTrustPolicy) && ctx.Err() == nil {
			s.o.Logger.Warn("refreshing the active TrustPolicy", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// verify checks bundle against the root key (TrustPolicy) or the active
// TrustPolicy (every other kind).
func (s *Service) verify(ctx context.Context, bundle []byte) (*sign.Verified, error) {
	if max := s.o.Store.MaxBytes(); len(bundle) > max {
		return nil, fmt.Errorf("%w: bundle is %d bytes, limit is %d", store.ErrTooLarge, len(bundle), max)
	}
	now := s.o.Now()
	trust, err := s.activeTrust(ctx)
	if errors.Is(err, ErrNoTrustPolicy) || sign.ReasonOf(err) != "" {
		// Bootstrap, or the active TrustPolicy expired: only a root-signed
		// TrustPolicy can be written.
		t, terr := sign.NewTrust(bundle, s.o.Root, now)
		if terr != nil {
			if sign.ReasonOf(terr) == sign.ReasonUnknownKey || sign.ReasonOf(terr) == sign.ReasonKindNotAllowed {
				return nil, fmt.Errorf("%w; only a root-signed TrustPolicy is accepted now (%v)", err, terr)
			}
			return nil, terr
		}
		return t.Policy(), nil
	}
	if err != nil {
		return nil, err
	}
	v, err := trust.Verify(bundle, now)
	if err != nil {
		return nil, err
	}
	if v.Object.Kind == artifact.KindTrustPolicy {
		t, err := sign.NewTrust(bundle, s.o.Root, now)
		if err != nil {
			return nil, err
		}
		v = t.Policy()
	}
	return v, nil
}

// ApplyBundle verifies bundle and stores it as the next revision of its
// artifact. It is the write path shared by Apply and the lifecycle.
func (s *Service) ApplyBundle(ctx context.Context, bundle []byte) (store.Record, bool, error) {
	v, err := s.verify(ctx, bundle)
	if err != nil {
		return store.Record{}, false, err
	}
	switch v.Object.Kind {
	case artifact.KindReceiptBatch:
		return store.Record{}, false, fmt.Errorf("%w: ReceiptBatch goes to the ReceiptsService", ErrWrongKind)
	case artifact.KindTombstone:
		return store.Record{}, false, fmt.Errorf("%w: a Tombstone is sent with Delete", ErrWrongKind)
	}
	rec, unchanged, err := s.o.Store.Put(ctx, store.Record{Kind: v.Object.Kind, Name: v.Object.Metadata.Name, Bundle: bundle, Signer: v.KeyID, Labels: v.Object.Metadata.Labels})
	if err != nil {
		return store.Record{}, false, err
	}
	if rec.Kind == artifact.KindTrustPolicy {
		if _, err := s.activeTrust(ctx); err != nil {
			s.o.Logger.Warn("loading the new TrustPolicy", "err", err)
		}
	}
	if !unchanged {
		s.o.Logger.Info("artifact stored", "kind", rec.Kind, "name", rec.Name, "revision", rec.Revision, "signer", rec.Signer)
		if l := s.lc(); l != nil {
			l.Applied(ctx, rec, v.Object)
		}
	}
	return rec, unchanged, nil
}

// Apply implements AdminService.Apply.
func (s *Service) Apply(ctx context.Context, req *mcpreadyv1.ApplyRequest) (*mcpreadyv1.ApplyResponse, error) {
	rec, unchanged, err := s.ApplyBundle(ctx, req.GetBundle())
	if err != nil {
		return nil, toStatus(err)
	}
	return &mcpreadyv1.ApplyResponse{Kind: string(rec.Kind), Name: rec.Name, Revision: rec.Revision, Unchanged: unchanged}, nil
}

// Delete implements AdminService.Delete: the tombstone's metadata.name
// must be its target name, and its signer must be granted the target kind.
func (s *Service) Delete(ctx context.Context, req *mcpreadyv1.DeleteRequest) (*mcpreadyv1.DeleteResponse, error) {
	v, err := s.verify(ctx, req.GetTombstone())
	if err != nil {
		return nil, toStatus(err)
	}
	ts, ok := v.Object.Spec.(*mcpreadyv1.Tombstone)
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "Delete needs a Tombstone, got a %s", v.Object.Kind)
	}
	target, err := artifact.ParseKind(ts.GetTargetKind())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "tombstone target: %v", err)
	}
	if ts.GetTargetName() != v.Object.Metadata.Name {
		return nil, status.Errorf(codes.InvalidArgument, "tombstone metadata.name %q must equal target_name %q", v.Object.Metadata.Name, ts.GetTargetName())
	}
	trust, err := s.activeTrust(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	if !mayDelete(trust, v.KeyID, target) {
		return nil, status.Errorf(codes.PermissionDenied, "%s: key %s may not sign %s, so it may not delete one", sign.ReasonKindNotAllowed, v.KeyID, target)
	}
	cur, err := s.o.Store.Get(ctx, target, ts.GetTargetName())
	if err != nil {
		return nil, toStatus(err)
	}
	if cur.Deleted {
		return nil, status.Errorf(codes.NotFound, "%s %q is already deleted", target, ts.GetTargetName())
	}
	rec, _, err := s.o.Store.Put(ctx, store.Record{Kind: target, Name: ts.GetTargetName(), Bundle: req.GetTombstone(), Signer: v.KeyID, Deleted: true})
	if err != nil {
		return nil, toStatus(err)
	}
	s.o.Logger.Info("artifact deleted", "kind", rec.Kind, "name", rec.Name, "revision", rec.Revision, "signer", rec.Signer)
	return &mcpreadyv1.DeleteResponse{Kind: string(rec.Kind), Name: rec.Name, Revision: rec.Revision}, nil
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

// Get implements AdminService.Get.
func (s *Service) Get(ctx context.Context, req *mcpreadyv1.GetRequest) (*mcpreadyv1.GetResponse, error) {
	k, err := artifact.ParseKind(req.GetKind())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	var recs []store.Record
	if req.GetName() != "" {
		r, err := s.o.Store.Get(ctx, k, req.GetName())
		if err != nil {
			return nil, toStatus(err)
		}
		recs = []store.Record{r}
	} else if recs, _, err = s.o.Store.List(ctx, k); err != nil {
		return nil, toStatus(err)
	}
	resp := &mcpreadyv1.GetResponse{}
	for _, r := range recs {
		if r.Deleted && !req.GetIncludeDeleted() {
			continue
		}
		resp.Artifacts = append(resp.Artifacts, toProto(r))
	}
	if req.GetName() != "" && len(resp.Artifacts) == 0 {
		return nil, status.Errorf(codes.NotFound, "%s %q is deleted", k, req.GetName())
	}
	return resp, nil
}

// History implements AdminService.History.
func (s *Service) History(ctx context.Context, req *mcpreadyv1.HistoryRequest) (*mcpreadyv1.HistoryResponse, error) {
	k, err := artifact.ParseKind(req.GetKind())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	recs, err := s.o.Store.History(ctx, k, req.GetName())
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &mcpreadyv1.HistoryResponse{}
	for _, r := range recs {
		resp.Revisions = append(resp.Revisions, toProto(r))
	}
	return resp, nil
}

// RegistryStatus implements AdminService.RegistryStatus.
func (s *Service) RegistryStatus(ctx context.Context, req *mcpreadyv1.RegistryStatusRequest) (*mcpreadyv1.RegistryStatusResponse, error) {
	l := s.lc()
	if l == nil {
		return nil, status.Error(codes.Unimplemented, "registry lifecycle is not configured")
	}
	entries, err := l.Status(ctx, req.GetName())
	if err != nil {
		return nil, toStatus(err)
	}
	return &mcpreadyv1.RegistryStatusResponse{Entries: entries}, nil
}

// ReportDrift implements AdminService.ReportDrift.
func (s *Service) ReportDrift(ctx context.Context, req *mcpreadyv1.ReportDriftRequest) (*mcpreadyv1.ReportDriftResponse, error) {
	l := s.lc()
	if l == nil {
		return nil, status.Error(codes.Unimplemented, "registry lifecycle is not configured")
	}
	resp, err := l.ReportDrift(ctx, req)
	if err != nil {
		return nil, toStatus(err)
	}
	return resp, nil
}

func toProto(r store.Record) *mcpreadyv1.StoredArtifact {
	return &mcpreadyv1.StoredArtifact{Kind: string(r.Kind), Name: r.Name, Revision: r.Revision, Bundle: r.Bundle,
		SignerKeyId: r.Signer, StoredAt: timestamppb.New(r.StoredAt), Deleted: r.Deleted, Digest: r.Digest}
}

// toStatus maps write-path errors to gRPC status codes; the message keeps
// the verification reason.
func toStatus(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	var ve *sign.VerifyError
	switch {
	case errors.Is(err, ErrNoTrustPolicy), errors.Is(err, ErrTrustExpired):
		return status.Errorf(codes.FailedPrecondition, "rejected: %v", err)
	case errors.As(err, &ve):
		switch ve.Reason {
		case sign.ReasonMalformed, sign.ReasonPayloadType, sign.ReasonDigestMismatch:
			return status.Errorf(codes.InvalidArgument, "rejected: %v", err)
		}
		return status.Errorf(codes.PermissionDenied, "rejected: %v", err)
	case errors.Is(err, ErrWrongKind), errors.Is(err, store.ErrTooLarge), errors.Is(err, store.ErrInvalid), errors.Is(err, artifact.ErrUnknownKind):
		return status.Errorf(codes.InvalidArgument, "rejected: %v", err)
	case errors.Is(err, store.ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, store.ErrConflict):
		return status.Error(codes.Aborted, err.Error())
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}
