package spool

import (
	"crypto"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcpready/mcpready/internal/recordio"
	"github.com/mcpready/mcpready/sign"
)

// FuzzOpen feeds arbitrary segment contents (framed records with arbitrary
// payloads, or raw bytes) to recovery: Open must fail cleanly or recover a
// spool that still accepts receipts.
func FuzzOpen(f *testing.F) {
	key, err := sign.GenerateKey(sign.AlgorithmEd25519)
	if err != nil {
		f.Fatal(err)
	}
	seed := realSegment(f, key)
	f.Add(seed, false)
	f.Add([]byte{recBatch, 1, 2, 3}, true)
	f.Add([]byte{recCheckpoint, 0x80}, true)
	f.Add([]byte{recGroup, 3, 1, 'x', 0}, true)
	f.Fuzz(func(t *testing.T, data []byte, frame bool) {
		if frame {
			data = recordio.Append(nil, data)
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "spool-0000000000000000.log"), data, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(dir, Options{AgentID: "agent-1", Signer: key})
		if err != nil {
			return
		}
		defer s.Close()
		if err := s.Append(mk(1)); err != nil {
			t.Fatalf("recovered spool refuses appends: %v", err)
		}
		if err := s.Flush(); err != nil {
			t.Fatalf("recovered spool cannot seal: %v", err)
		}
	})
}

// realSegment returns the bytes of a small real segment: receipt groups, a
// sealed batch, an acknowledgement and an unsealed receipt.
func realSegment(f *testing.F, key crypto.Signer) []byte {
	dir := f.TempDir()
	s, err := Open(dir, Options{AgentID: "agent-1", Signer: key})
	if err != nil {
		f.Fatal(err)
	}
	s.Append(mk(1))
	s.Append(mk(2))
	s.Flush()
	s.Ack(1)
	s.Append(mk(3))
	s.Close()
	data, err := os.ReadFile(filepath.Join(dir, "spool-0000000000000000.log"))
	if err != nil {
		f.Fatal(err)
	}
	return data
}
