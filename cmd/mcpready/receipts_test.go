package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/agent/receipt"
	"github.com/mcpready/mcpready/agent/spool"
	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/ingest"
	"github.com/mcpready/mcpready/controlplane/receiptstore"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/sign"
)

// receiptsServer runs the receipts service with three stored batches from
// agent-1 and returns its address, the last receipt id and the key paths.
func receiptsServer(t *testing.T) (addr, lastID, agentPub, rootPub, trustFile string) {
	dir := t.TempDir()
	agentKey, err := sign.WriteKeyPair(filepath.Join(dir, "agent"), sign.AlgorithmECDSAP256, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	rootKey, err := sign.WriteKeyPair(filepath.Join(dir, "root"), sign.AlgorithmECDSAP256, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	pemPub := mustRead(t, filepath.Join(dir, "agent.pub"))
	id, _ := sign.KeyID(agentKey.Public())
	tp := &mcpreadyv1.TrustPolicy{Keys: []*mcpreadyv1.KeyGrant{{KeyId: id, PublicKey: string(pemPub), Name: "agent-1", Kinds: []string{"ReceiptBatch"}, Scopes: []string{"agent-1/*"}}}}
	tpBundle, _, err := sign.Sign(artifact.New(artifact.KindTrustPolicy, "example/trust", tp), rootKey)
	if err != nil {
		t.Fatal(err)
	}
	trustFile = writeFile(t, dir, "trust.bundle.json", tpBundle)
	trust, err := sign.NewTrust(tpBundle, rootKey.Public(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	st, err := receiptstore.Open(filepath.Join(dir, "store"), receiptstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := ingest.New(ingest.Options{Store: st, Trust: func() *sign.Trust { return trust }})
	if err != nil {
		t.Fatal(err)
	}
	sp, err := spool.Open(filepath.Join(dir, "spool"), spool.Options{AgentID: "agent-1", Signer: agentKey, BatchSize: 2, BatchInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	b := receipt.Builder{EmitterID: "agent-1", EmitterVersion: "test"}
	for i := 0; i < 5; i++ {
		r := b.Start(time.Now())
		r.Requested, r.PrincipalClass, r.TenantClass, r.Region, r.PolicyVersion = "docs_lookup", "employee", "acme", "eu", "acme-policy@3"
		b.Arguments(r, []byte(`{"query":"x"}`))
		r.Candidates = []*mcpreadyv1.Candidate{
			{ServerName: "docs-a", ToolName: "lookup", Endpoint: "http://a", Selected: true},
			{ServerName: "docs-b", ToolName: "lookup", Endpoint: "http://b", RejectedAtStep: 6, RejectionCode: "CIRCUIT_OPEN", RejectionReason: "circuit open after 5 failures"},
		}
		r.Selected = &mcpreadyv1.Selection{ServerName: "docs-a", ToolName: "lookup", Endpoint: "http://a", ServerVersion: "1.0.0"}
		r.Attempts = []*mcpreadyv1.Attempt{{Number: 1, Entry: "docs-a/lookup", Latency: durationpb.New(3 * time.Millisecond), Outcome: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS}}
		r.Outcome = mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS
		b.Finish(r, time.Now())
		if err := sp.Append(r); err != nil {
			t.Fatal(err)
		}
		lastID = r.ReceiptId
	}
	sp.Flush()
	for _, bt := range pendingBatches(t, sp) {
		if _, err := svc.Ingest(nil, bt.UploadRequest()); err != nil {
			t.Fatal(err)
		}
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	mcpreadyv1.RegisterReceiptsServiceServer(srv, svc)
	go srv.Serve(lis)
	t.Cleanup(func() { srv.Stop(); st.Close() })
	return lis.Addr().String(), lastID, filepath.Join(dir, "agent.pub"), filepath.Join(dir, "root.pub"), trustFile
}

func TestReceiptsCommands(t *testing.T) {
	addr, lastID, agentPub, rootPub, trustFile := receiptsServer(t)
	code, out, errOut := runKeyCLI(t, "receipts", "tail", "-n", "3", "--server", addr)
	if code != exitOK || strings.Count(out, "docs_lookup") != 3 || !strings.Contains(out, "OUTCOME") {
		t.Fatalf("tail: %d %q %s", code, out, errOut)
	}
	// -n N is the last N; -o json prints JSON lines, one receipt per line,
	// the newest last.
	code, out, errOut = runKeyCLI(t, "receipts", "tail", "-n", "2", "-o", "json", "--server", addr)
	tailLines := strings.Split(strings.TrimSpace(out), "\n")
	if code != exitOK || len(tailLines) != 2 || !strings.Contains(tailLines[1], lastID) {
		t.Fatalf("tail -n 2 -o json: %d %q %s", code, out, errOut)
	}
	for _, l := range tailLines {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("tail -o json line %q: %v", l, err)
		}
	}
	if code, _, _ = runKeyCLI(t, "receipts", "tail", "-n", "0", "--server", addr); code != exitUsage {
		t.Fatalf("tail -n 0: exit %d, want %d", code, exitUsage)
	}
	code, out, _ = runKeyCLI(t, "receipts", "get", lastID, "--server", addr, "-o", "json")
	if code != exitOK || !strings.Contains(out, lastID) {
		t.Fatalf("get: %d %s", code, out)
	}
	if code, _, _ = runKeyCLI(t, "receipts", "get", "NOPE", "--server", addr); code == exitOK {
		t.Fatal("get of a missing receipt succeeded")
	}
	code, out, _ = runKeyCLI(t, "explain", lastID, "--server", addr)
	for _, want := range []string{"docs_lookup", "acme-policy@3", "docs-b/lookup at http://b: rejected at step 6 (current health): CIRCUIT_OPEN: circuit open after 5 failures", "Outcome: success", "docs-a/lookup at http://a: selected"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain lacks %q:\n%s", want, out)
		}
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "export.jsonl")
	if code, _, errOut = runKeyCLI(t, "receipts", "export", "--since", "1h", "--output-file", file, "--server", addr); code != exitOK {
		t.Fatalf("export: %d %s", code, errOut)
	}
	data := mustRead(t, file)
	if n := bytes.Count(data, []byte("\n")); n != 3 {
		t.Fatalf("export has %d lines", n)
	}
	if code, out, errOut = runKeyCLI(t, "receipts", "verify", file, "--key", agentPub); code != exitOK || !strings.Contains(out, "verified") {
		t.Fatalf("verify --key: %d %s %s", code, out, errOut)
	}
	if code, _, errOut = runKeyCLI(t, "receipts", "verify", file, "--root", rootPub, "--trust", trustFile); code != exitOK {
		t.Fatalf("verify --trust: %d %s", code, errOut)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	swapped := writeFile(t, dir, "swapped.jsonl", bytes.Join([][]byte{lines[0], lines[2], lines[1]}, nil))
	code, _, errOut = runKeyCLI(t, "receipts", "verify", swapped, "--key", agentPub)
	if code != exitVerify || !strings.Contains(errOut, "gap") || !strings.Contains(errOut, "sequence 3") {
		t.Fatalf("verify swapped: %d %s", code, errOut)
	}
	tampered := bytes.Replace(data, []byte(`"sig":"M`), []byte(`"sig":"N`), 1) // ECDSA DER signatures start "ME"
	if bytes.Equal(tampered, data) {
		t.Fatal("could not tamper")
	}
	edited := writeFile(t, dir, "edited.jsonl", tampered)
	if code, _, errOut = runKeyCLI(t, "receipts", "verify", edited, "--key", agentPub); code != exitVerify || !strings.Contains(errOut, "batch ") {
		t.Fatalf("verify edited: %d %s", code, errOut)
	}
	if code, _, _ = runKeyCLI(t, "receipts", "verify", file); code != exitUsage {
		t.Fatalf("verify without keys: %d", code)
	}
	if code, _, _ = runKeyCLI(t, "receipts", "verify", "--key", agentPub); code != exitUsage {
		t.Fatalf("verify without a file: %d", code)
	}
	// Two replicas' exports, each with part of the chain (one batch in
	// both), verify together; either alone has a gap.
	partA := writeFile(t, dir, "a.jsonl", bytes.Join([][]byte{lines[0], lines[2]}, nil))
	partB := writeFile(t, dir, "b.jsonl", bytes.Join([][]byte{lines[1], lines[2]}, nil))
	if code, out, errOut = runKeyCLI(t, "receipts", "verify", partA, partB, "--key", agentPub); code != exitOK || !strings.Contains(out, "1-3") {
		t.Fatalf("verify two exports: %d %s %s", code, out, errOut)
	}
	if code, _, errOut = runKeyCLI(t, "receipts", "verify", partA, "--key", agentPub); code != exitVerify || !strings.Contains(errOut, "a.jsonl:2") {
		t.Fatalf("verify one part: %d %s", code, errOut)
	}
}

// FuzzParseSince: --since is empty (no bound), RFC 3339 (that instant,
// which the export request can carry: years 0001 to 9999 in UTC) or a
// non-negative duration back from now (never after now, exactly that long
// before it); anything else is a usage error naming the input. An accepted
// instant written back as RFC 3339 parses to itself.
func FuzzParseSince(f *testing.F) {
	for _, s := range []string{"", "1h", "24h", "0s", "-0s", "-1h", "2026-11-29T10:00:00Z", "2026-11-29T10:00:00.5+05:30",
		"2562047h47m16.854775807s", "2562047h47m16.854775808s", "0001-01-01T00:00:00Z", "0000-06-01T00:00:00Z",
		"9999-12-31T23:59:59Z", "9999-12-31T23:59:59-01:00", "0001-01-01T00:30:00+01:00", "yesterday", " 1h", "1.5d"} {
		f.Add(s, int64(1_800_000_000_000_000_000))
	}
	f.Fuzz(func(t *testing.T, s string, nowNanos int64) {
		now := time.Unix(0, nowNanos).UTC()
		got, err := parseSince(s, now)
		abs, absErr := time.Parse(time.RFC3339, s)
		d, durErr := time.ParseDuration(s)
		var ce *codedError
		switch {
		case s == "":
			if err != nil || !got.IsZero() {
				t.Fatalf("empty: %v, %v", got, err)
			}
		case err != nil:
			if !errors.As(err, &ce) || ce.code != exitUsage || !strings.Contains(err.Error(), fmt.Sprintf("%q", s)) {
				t.Fatalf("%q: error %v (want a usage error naming the input)", s, err)
			}
			if absErr == nil && timestamppb.New(abs).CheckValid() == nil || durErr == nil && d >= 0 {
				t.Fatalf("%q: refused (%v)", s, err)
			}
		case absErr == nil:
			if !got.Equal(abs) || timestamppb.New(got).CheckValid() != nil {
				t.Fatalf("%q: %v, want %v within the years 0001-9999", s, got, abs)
			}
			if again, err := parseSince(got.Format(time.RFC3339Nano), now); err != nil || !again.Equal(got) {
				t.Fatalf("%q: %v written back: %v, %v", s, got, again, err)
			}
		case durErr == nil:
			if d < 0 || got.After(now) || now.Sub(got) != d || timestamppb.New(got).CheckValid() != nil {
				t.Fatalf("%q at %v: %v", s, now, got)
			}
		default:
			t.Fatalf("%q: accepted as %v", s, got)
		}
	})
}
