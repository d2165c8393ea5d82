// Package admin implements the AdminService over gRPC: Apply and Delete
// hand bundles to the control plane's one write path (a *writer.Writer,
// which verifies before it stores), Get and History read the store, and
// RegistryStatus and ReportDrift are answered by the registry lifecycle.
// It maps errors to gRPC status codes, keeping the verification reason.
//
// The package must not verify, sign or store anything itself, must not
// call store.Put, and must not tell the lifecycle about writes (the
// lifecycle watches the store).
package admin

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/store"
	"github.com/mcpready/mcpready/controlplane/writer"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/sign"
)

// Lifecycle answers the registry questions of the Admin API (a
// *lifecycle.Manager).
type Lifecycle interface {
	Status(ctx context.Context, name string) ([]*mcpreadyv1.RegistryStatus, error)
	ReportDrift(ctx context.Context, req *mcpreadyv1.ReportDriftRequest) (*mcpreadyv1.ReportDriftResponse, error)
}

// Options configures a Service.
type Options struct {
	// Writer is the verified write path; required (New panics without it).
	// Reads go to its Store.
	Writer *writer.Writer
	// Lifecycle answers RegistryStatus and ReportDrift; nil makes both
	// answer Unimplemented.
	Lifecycle Lifecycle
}

// Service implements mcpreadyv1.AdminServiceServer. It holds no state of
// its own and is safe for concurrent use.
type Service struct {
	mcpreadyv1.UnimplementedAdminServiceServer
	w  *writer.Writer
	st *store.Store
	lc Lifecycle
}

// New returns a Service.
func New(o Options) *Service {
	if o.Writer == nil {
		panic("admin: Options.Writer is required")
	}
	return &Service{w: o.Writer, st: o.Writer.Store(), lc: o.Lifecycle}
}

// Apply implements AdminService.Apply.
func (s *Service) Apply(ctx context.Context, req *mcpreadyv1.ApplyRequest) (*mcpreadyv1.ApplyResponse, error) {
	rec, unchanged, err := s.w.Apply(ctx, req.GetBundle())
	if err != nil {
		return nil, toStatus(err)
	}
	return &mcpreadyv1.ApplyResponse{Kind: string(rec.Kind), Name: rec.Name, Revision: rec.Revision, Unchanged: unchanged}, nil
}

// Delete implements AdminService.Delete (see writer.Writer.Delete).
func (s *Service) Delete(ctx context.Context, req *mcpreadyv1.DeleteRequest) (*mcpreadyv1.DeleteResponse, error) {
	rec, err := s.w.Delete(ctx, req.GetTombstone())
	if err != nil {
		return nil, toStatus(err)
	}
	return &mcpreadyv1.DeleteResponse{Kind: string(rec.Kind), Name: rec.Name, Revision: rec.Revision}, nil
}

// Get implements AdminService.Get.
func (s *Service) Get(ctx context.Context, req *mcpreadyv1.GetRequest) (*mcpreadyv1.GetResponse, error) {
	k, err := artifact.ParseKind(req.GetKind())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	var recs []store.Record
	if req.GetName() != "" {
		r, err := s.st.Get(ctx, k, req.GetName())
		if err != nil {
			return nil, toStatus(err)
		}
		recs = []store.Record{r}
	} else if recs, _, err = s.st.List(ctx, k); err != nil {
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
	recs, err := s.st.History(ctx, k, req.GetName())
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
	l := s.lc
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
	l := s.lc
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
// the verification reason. Sentinels are matched first, so a store error
// wrapping an etcd status still maps by its sentinel.
func toStatus(err error) error {
	var ve *sign.VerifyError
	switch {
	case errors.Is(err, artifact.ErrRollback), errors.Is(err, artifact.ErrExpired), errors.Is(err, sign.ErrTrustChain), errors.Is(err, artifact.ErrTombstone):
		// the reason ("rollback", "expired") leads the message
		return status.Errorf(codes.FailedPrecondition, "rejected: %v", err)
	case errors.Is(err, artifact.ErrBadVersion):
		return status.Errorf(codes.InvalidArgument, "rejected: %v", err)
	case errors.Is(err, writer.ErrNoTrustPolicy), errors.Is(err, writer.ErrTrustExpired), errors.Is(err, writer.ErrTrustRolledBack):
		return status.Errorf(codes.FailedPrecondition, "rejected: %v", err)
	case errors.As(err, &ve):
		switch ve.Reason {
		case sign.ReasonMalformed, sign.ReasonPayloadType, sign.ReasonDigestMismatch, sign.ReasonGrantUnbound:
			return status.Errorf(codes.InvalidArgument, "rejected: %v", err)
		}
		return status.Errorf(codes.PermissionDenied, "rejected: %v", err)
	case errors.Is(err, writer.ErrWrongKind), errors.Is(err, writer.ErrTombstone), errors.Is(err, store.ErrTooLarge), errors.Is(err, store.ErrInvalid), errors.Is(err, artifact.ErrUnknownKind):
		return status.Errorf(codes.InvalidArgument, "rejected: %v", err)
	case errors.Is(err, writer.ErrNotPermitted):
		return status.Error(codes.PermissionDenied, err.Error())
	case errors.Is(err, store.ErrNotFound), errors.Is(err, writer.ErrDeleted):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, store.ErrConflict):
		return status.Error(codes.Aborted, err.Error())
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	}
	if _, ok := status.FromError(err); ok {
		return err // already a status (e.g. the lifecycle's argument checks)
	}
	return status.Error(codes.Internal, err.Error())
}
