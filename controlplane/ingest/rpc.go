package ingest

import (
	"context"
	"errors"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mcpready/mcpready/controlplane/receiptstore"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/ledger"
)

// UploadBatches takes a stream of signed batches and answers each, in
// order, after it is durably stored (or rejected). The agent bounds how
// many it sends ahead; gRPC flow control does the rest. Once a batch is
// refused as agent-rate-limited, so is every later one on the stream.
func (s *Service) UploadBatches(stream mcpreadyv1.ReceiptsService_UploadBatchesServer) error {
	var node *mcpreadyv1.Node
	var limited *RejectError // the refusal of a batch over the agent's bound
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if node == nil && req.GetNode() != nil {
			node = req.GetNode()
		}
		var res Result
		if limited != nil {
			// The rest of a stream whose batch was over the bound: those
			// batches could only be gaps; the agent resends them all.
			err = limited
			s.m.batches.WithLabelValues(limited.Reason).Inc()
		} else if res, err = s.Ingest(node, req); err != nil {
			if rej := (*RejectError)(nil); errors.As(err, &rej) && rej.Reason == ReasonAgentRateLimited {
				limited = rej
			}
		}
		resp := &mcpreadyv1.UploadBatchesResponse{BatchId: req.GetBatchId(), Sequence: req.GetSequence(), Accepted: err == nil, Duplicate: res.Duplicate}
		if err != nil {
			resp.Error = err.Error()
		}
		if rej := (*RejectError)(nil); errors.As(err, &rej) && rej.RetryAfter > 0 {
			resp.RetryAfter = durationpb.New(rej.RetryAfter)
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

// MaxPage bounds one page of QueryReceipts (and is a page's size when the
// request names no limit), so a query for a huge range is answered a page
// at a time in bounded memory.
const MaxPage = 1000

func toQuery(r *mcpreadyv1.QueryReceiptsRequest) receiptstore.Query {
	q := receiptstore.Query{ReceiptID: r.GetReceiptId(), WorkflowID: r.GetWorkflowId(), ServerName: r.GetServerName(), ToolName: r.GetToolName(),
		AgentID: r.GetAgentId(), Limit: int(r.GetLimit()), Before: r.GetPageToken()}
	if q.Limit == 0 {
		q.Limit = MaxPage
	}
	if r.GetSince() != nil {
		q.Since = r.GetSince().AsTime()
	}
	if r.GetUntil() != nil {
		q.Until = r.GetUntil().AsTime()
	}
	return q
}

// QueryReceipts finds receipts by id, workflow, subject, agent and time.
func (s *Service) QueryReceipts(ctx context.Context, r *mcpreadyv1.QueryReceiptsRequest) (*mcpreadyv1.QueryReceiptsResponse, error) {
	if r.GetLimit() < 0 || r.GetLimit() > MaxPage {
		return nil, status.Errorf(codes.InvalidArgument, "limit must be between 0 and %d (page with page_token)", MaxPage)
	}
	rs, next, err := s.q.Query(ctx, toQuery(r))
	if errors.Is(err, receiptstore.ErrBadCursor) {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if r.GetReceiptId() != "" && len(rs) == 0 {
		return nil, status.Errorf(codes.NotFound, "receipt %s not found", r.GetReceiptId())
	}
	return &mcpreadyv1.QueryReceiptsResponse{Receipts: rs, NextPageToken: next}, nil
}

// TailReceipts streams the last n receipts (default 10) and, with follow,
// new ones until the client goes away.
func (s *Service) TailReceipts(r *mcpreadyv1.TailReceiptsRequest, stream mcpreadyv1.ReceiptsService_TailReceiptsServer) error {
	n := int(r.GetN())
	if n < 0 {
		return status.Error(codes.InvalidArgument, "n must not be negative")
	}
	if n == 0 {
		n = 10
	}
	err := s.q.Tail(stream.Context(), n, r.GetFollow(), func(sr *mcpreadyv1.StoredReceipt) error {
		return stream.Send(&mcpreadyv1.TailReceiptsResponse{Receipt: sr})
	})
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}

// ExportBatches streams stored batches exactly as signed.
func (s *Service) ExportBatches(r *mcpreadyv1.ExportBatchesRequest, stream mcpreadyv1.ReceiptsService_ExportBatchesServer) error {
	var since time.Time
	if r.GetSince() != nil {
		since = r.GetSince().AsTime()
	}
	return s.q.Export(stream.Context(), since, r.GetAgentId(), func(b *ledger.Batch) error {
		return stream.Send(b.ExportResponse())
	})
}
