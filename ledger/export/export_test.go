package export

import (
	"bytes"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/ledger"
	"github.com/mcpready/mcpready/ledger/ledgertest"
	"github.com/mcpready/mcpready/sign"
)

// lines signs a chain of n batches of 3 receipts for agent.
func lines(t testing.TB, k crypto.Signer, agent string, n int) []ledger.Batch {
	var out []ledger.Batch
	head := ledger.Head{}
	for s := 1; s <= n; s++ {
		b := &mcpreadyv1.ReceiptBatch{AgentId: agent, Sequence: uint64(s), BatchId: fmt.Sprintf("%s-b%d", agent, s), PrevBatchDigest: head.Digest, CreatedAt: timestamppb.Now()}
		var enc [][]byte
		for i := 0; i < 3; i++ {
			e, _ := ledger.Encode(mkReceipt(agent, s, i, ""))
			enc = append(enc, e)
			b.ReceiptDigests = append(b.ReceiptDigests, ledger.Digest(e))
		}
		bundle, _, err := sign.Sign(artifact.New(artifact.KindReceiptBatch, ledger.BatchName(agent, b.Sequence), b), k)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ledger.Batch{BatchID: b.BatchId, AgentID: agent, Sequence: b.Sequence, Bundle: bundle, Receipts: enc})
		head = ledger.Head{Sequence: b.Sequence, Digest: artifact.Digest(bundle)}
	}
	return out
}

func mkReceipt(agent string, s, i int, suffix string) *mcpreadyv1.Receipt {
	r := ledgertest.Receipt(agent, time.Unix(1000, 0))
	r.ReceiptId = fmt.Sprintf("%s-%d-%d", agent, s, i)
	r.Requested = fmt.Sprintf("docs_lookup#%d-%d%s", s, i, suffix)
	return r
}

func encode(t testing.TB, ls []ledger.Batch) []byte {
	var buf bytes.Buffer
	for _, l := range ls {
		if err := Write(&buf, l); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// editPayload rewrites the signed statement inside a bundle (an attacker
// editing an export without the key).
func editPayload(t *testing.T, bundle []byte, edit func(string) string) []byte {
	var m map[string]any
	if err := json.Unmarshal(bundle, &m); err != nil {
		t.Fatal(err)
	}
	env := m["dsseEnvelope"].(map[string]any)
	p, _ := base64.StdEncoding.DecodeString(env["payload"].(string))
	env["payload"] = base64.StdEncoding.EncodeToString([]byte(edit(string(p))))
	out, _ := json.Marshal(m)
	return out
}

func TestVerifyDetectsTampering(t *testing.T) {
	k, _ := sign.GenerateKey(sign.AlgorithmECDSAP256)
	other, _ := sign.GenerateKey(sign.AlgorithmECDSAP256)
	byKey := func(bundle []byte) (*sign.Verified, error) { return sign.VerifyWithKey(bundle, k.Public()) }
	good := append(lines(t, k, "agent-1", 4), lines(t, k, "agent-2", 2)...)
	sum, err := Verify(bytes.NewReader(encode(t, good)), byKey)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum) != 2 || sum[0].Batches != 4 || sum[0].Receipts != 12 || sum[1].LastSeq != 2 {
		t.Fatalf("summary %+v", sum)
	}
	// An export that starts mid-chain verifies from its first batch.
	if sum, err := Verify(bytes.NewReader(encode(t, good[2:4])), byKey); err != nil || !sum[0].StartsMidChain {
		t.Fatal(sum, err)
	}
	mut := func(f func([]ledger.Batch) []ledger.Batch) []ledger.Batch {
		return f(append([]ledger.Batch(nil), good...))
	}
	edited := mut(func(ls []ledger.Batch) []ledger.Batch {
		ls[1].Receipts = append([][]byte(nil), ls[1].Receipts...)
		ls[1].Receipts[1], _ = ledger.Encode(mkReceipt("agent-1", 2, 1, "X"))
		return ls
	})
	removedReceipt := mut(func(ls []ledger.Batch) []ledger.Batch { ls[2].Receipts = ls[2].Receipts[1:]; return ls })
	editedManifest := mut(func(ls []ledger.Batch) []ledger.Batch {
		ls[0].Bundle = editPayload(t, ls[0].Bundle, func(p string) string { return strings.Replace(p, `"sequence":"1"`, `"sequence":"1" `, 1) + " " })
		return ls
	})
	resigned := mut(func(ls []ledger.Batch) []ledger.Batch { ls[1] = lines(t, other, "agent-1", 2)[1]; return ls })
	for _, tc := range []struct {
		name   string
		ls     []ledger.Batch
		batch  string
		reason string
	}{
		{"edited receipt", edited, "agent-1-b2", "receipt-digest-mismatch"},
		{"removed receipt", removedReceipt, "agent-1-b3", "receipt-digest-mismatch"},
		{"edited manifest", editedManifest, "agent-1-b1", "bad-signature"},
		{"removed batch", mut(func(ls []ledger.Batch) []ledger.Batch { return append(ls[:1], ls[2:]...) }), "agent-1-b3", "gap"},
		{"reordered batches", mut(func(ls []ledger.Batch) []ledger.Batch { ls[1], ls[2] = ls[2], ls[1]; return ls }), "agent-1-b3", "gap"},
		{"replayed batch", mut(func(ls []ledger.Batch) []ledger.Batch {
			return append(ls[:4], append([]ledger.Batch{ls[1]}, ls[4:]...)...)
		}), "agent-1-b2", "replay"},
		{"batch from a forked chain", mut(func(ls []ledger.Batch) []ledger.Batch { f := lines(t, k, "agent-1", 4); ls[2] = f[2]; return ls }), "agent-1-b3", "fork"},
		{"signed by another key", resigned, "agent-1-b2", "unknown-key"},
		{"line header lies", mut(func(ls []ledger.Batch) []ledger.Batch { ls[0].Sequence = 7; return ls }), "agent-1-b1", "mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Verify(bytes.NewReader(encode(t, tc.ls)), byKey)
			var f *Failure
			if !errors.As(err, &f) {
				t.Fatalf("not a failure: %v", err)
			}
			if f.BatchID != tc.batch || f.Reason != tc.reason {
				t.Fatalf("failure %v, want batch %s reason %s", f, tc.batch, tc.reason)
			}
		})
	}
}

func TestReadRejectsMalformed(t *testing.T) {
	for _, in := range []string{`{"batchId":"x"}`, `{"batchId":"x","bundle":"str"}`, `{"bundle":{},"extra":1}`, `{"bundle":{}} {}`, `nope`,
		`{"bundle":{}}}`, `{"Bundle":{}}]`} { // a stray closing bracket is trailing data too
		if err := Read(strings.NewReader(in), func(int, ledger.Batch) error { return nil }); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: %v", in, err)
		}
	}
	if err := Write(&bytes.Buffer{}, ledger.Batch{Bundle: []byte("{\n}")}); err == nil {
		t.Error("multi-line bundle written")
	}
}

func FuzzRead(f *testing.F) {
	f.Add([]byte(`{"batchId":"b","agentId":"a","sequence":1,"bundle":{"x":1}}` + "\n\n" + `{"bundle":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		Read(bytes.NewReader(data), func(_ int, l ledger.Batch) error {
			if !json.Valid(l.Bundle) || l.Bundle[0] != '{' {
				t.Fatalf("invalid bundle passed: %q", l.Bundle)
			}
			return nil
		})
	})
}

// Exports from several control-plane replicas verify together: each holds
// part of an agent's chain, in order; a batch both replicas stored counts
// once.
func TestVerifyAllMergesReplicas(t *testing.T) {
	k, _ := sign.GenerateKey(sign.AlgorithmECDSAP256)
	byKey := func(bundle []byte) (*sign.Verified, error) { return sign.VerifyWithKey(bundle, k.Public()) }
	c := lines(t, k, "agent-1", 5) // b1..b5
	other := lines(t, k, "agent-2", 2)
	forked := lines(t, k, "agent-1", 5)
	in := func(name string, ls ...ledger.Batch) Input {
		return Input{Name: name, R: bytes.NewReader(encode(t, ls))}
	}

	sum, err := VerifyAll([]Input{in("a", c[0], c[2], other[0], c[3]), in("b", c[1], c[2], other[1], c[4])}, byKey)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum) != 2 || sum[0].Batches != 5 || sum[0].Receipts != 15 || sum[0].StartsMidChain || sum[0].LastSeq != 5 || sum[1].Batches != 2 {
		t.Fatalf("summary %+v", sum)
	}
	for _, tc := range []struct {
		name, input, batch, reason string
		inputs                     []Input
	}{
		{"missing from every export", "b", "agent-1-b4", "gap", []Input{in("a", c[0], c[1]), in("b", c[3], c[4])}},
		{"forked batch in one export", "b", "agent-1-b3", "fork", []Input{in("a", c[0], c[1], c[3]), in("b", forked[2])}},
		{"reordered within an export", "a", "agent-1-b2", "reordered", []Input{in("a", c[0], c[2], c[1]), in("b", c[3])}},
		{"repeated within an export", "a", "agent-1-b1", "replay", []Input{in("a", c[0], c[0]), in("b", c[1])}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := VerifyAll(tc.inputs, byKey)
			var f *Failure
			if !errors.As(err, &f) {
				t.Fatalf("not a failure: %v", err)
			}
			if f.Input != tc.input || f.BatchID != tc.batch || f.Reason != tc.reason {
				t.Fatalf("failure %v, want %s: batch %s reason %s", f, tc.input, tc.batch, tc.reason)
			}
		})
	}
}

// The first failing batch is named, even when a later one fails on its own.
func TestVerifyNamesFirstFailure(t *testing.T) {
	k, _ := sign.GenerateKey(sign.AlgorithmECDSAP256)
	other, _ := sign.GenerateKey(sign.AlgorithmECDSAP256)
	byKey := func(bundle []byte) (*sign.Verified, error) { return sign.VerifyWithKey(bundle, k.Public()) }
	ls := lines(t, k, "agent-1", 4)
	ls = []ledger.Batch{ls[0], ls[2], ls[1], lines(t, other, "agent-1", 4)[3]} // gap at line 2, unknown key at line 4
	_, err := Verify(bytes.NewReader(encode(t, ls)), byKey)
	var f *Failure
	if !errors.As(err, &f) || f.Line != 2 || f.Reason != "gap" {
		t.Fatalf("failure %v, want the gap at line 2", err)
	}
}

// FuzzVerifyAllSplits spreads one valid chain over two exports (each in
// chain order, some batches in both, some in neither): VerifyAll accepts
// exactly the splits that cover every batch, and always names the first
// missing one otherwise.
func FuzzVerifyAllSplits(f *testing.F) {
	k, _ := sign.GenerateKey(sign.AlgorithmEd25519)
	chain := lines(f, k, "agent-1", 8)
	byKey := func(bundle []byte) (*sign.Verified, error) { return sign.VerifyWithKey(bundle, k.Public()) }
	f.Add(uint8(0b01010101), uint8(0b10101010))
	f.Add(uint8(0xff), uint8(0xff))
	f.Add(uint8(0b00001111), uint8(0b11110111))
	f.Fuzz(func(t *testing.T, inA, inB uint8) {
		var a, b []ledger.Batch
		first, missing := 0, -1
		for i, l := range chain {
			if inA&(1<<i) != 0 {
				a = append(a, l)
			}
			if inB&(1<<i) != 0 {
				b = append(b, l)
			}
			if inA&(1<<i) == 0 && inB&(1<<i) == 0 && missing < 0 && i > first {
				missing = i
			}
			if inA&(1<<i) == 0 && inB&(1<<i) == 0 && i == first {
				first++ // a chain may start mid-way
			}
		}
		if first == len(chain) {
			return // nothing exported
		}
		// Batches after a gap make it a gap only if something follows.
		followed := false
		for i := missing + 1; missing >= 0 && i < len(chain); i++ {
			followed = followed || inA&(1<<i) != 0 || inB&(1<<i) != 0
		}
		sum, err := VerifyAll([]Input{{Name: "a", R: bytes.NewReader(encode(t, a))}, {Name: "b", R: bytes.NewReader(encode(t, b))}}, byKey)
		if missing >= 0 && followed {
			var fl *Failure
			if !errors.As(err, &fl) || fl.Reason != "gap" {
				t.Fatalf("split %08b/%08b: batch %d missing, got %v", inA, inB, missing+1, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("split %08b/%08b: %v", inA, inB, err)
		}
		if len(sum) != 1 || sum[0].Batches != int(sum[0].LastSeq-sum[0].FirstSeq+1) || sum[0].FirstSeq != uint64(first+1) {
			t.Fatalf("split %08b/%08b: summary %+v", inA, inB, sum)
		}
	})
}

// FuzzParseLine: a line is accepted only when it is exactly one JSON
// object whose bundle is a JSON object, Read agrees with parseLine (and
// wraps its refusals in ErrFormat), the batch owns its bundle, and Write
// re-encodes an accepted batch to a line that parses back to the same
// batch: the same header and receipts, a bundle that is the same JSON (the
// same bytes when it was already compact and had nothing Write escapes),
// and a line that Write reproduces byte for byte.
func FuzzParseLine(f *testing.F) {
	for _, s := range []string{
		`{"batchId":"b","agentId":"a","sequence":1,"bundle":{"x":1}}`, `{"bundle":{}}`,
		`{"batchId":"x"}`, `{"batchId":"x","bundle":"str"}`, `{"bundle":{},"extra":1}`, `{"bundle":{}} {}`, `nope`,
		`{"bundle":{}}}`, `{"bundle":{}}]`, `{"bundle":{"a":"<&>"},"receipts":["AAE=",null]}`, `{"bundle":{ "a" : 1 },"receipts":[]}`,
		`{"bundle":{},"sequence":18446744073709551615}`, `{"bundle":{},"sequence":-1}`, `{"bundle":{},"receipts":["!"]}`,
		`{"bundle":null}`, `{"bundle":[]}`, `{"BUNDLE":{}}`, `{"bundle":{"a":"\u2028"}}`, "{\"bundle\":{\r}}",
	} {
		f.Add([]byte(s))
	}
	k, _ := sign.GenerateKey(sign.AlgorithmEd25519)
	for _, l := range lines(f, k, "agent-1", 2) {
		f.Add(bytes.TrimSpace(encode(f, []ledger.Batch{l})))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		text = bytes.TrimSpace(text)
		if len(text) == 0 {
			return // Read skips blank lines
		}
		in := bytes.Clone(text)
		l, err := parseLine(in)
		if !bytes.ContainsAny(text, "\r\n") {
			rerr := Read(bytes.NewReader(text), func(int, ledger.Batch) error { return nil })
			if (rerr == nil) != (err == nil) || rerr != nil && !errors.Is(rerr, ErrFormat) {
				t.Fatalf("%q: parseLine %v, Read %v", text, err, rerr)
			}
		}
		if err != nil {
			return
		}
		if !json.Valid(text) || text[0] != '{' {
			t.Fatalf("%q accepted: not one JSON object", text)
		}
		if !json.Valid(l.Bundle) || l.Bundle[0] != '{' {
			t.Fatalf("%q: bundle %q is not a JSON object", text, l.Bundle)
		}
		bundle := bytes.Clone(l.Bundle)
		clear(in)
		if !bytes.Equal(l.Bundle, bundle) {
			t.Fatalf("%q: the bundle shares the line's memory", text)
		}
		var w bytes.Buffer
		if err := Write(&w, l); err != nil {
			if !errors.Is(err, ErrFormat) || !bytes.ContainsAny(l.Bundle, "\r\n") {
				t.Fatalf("%q: Write: %v", text, err)
			}
			return
		}
		again, err := parseLine(bytes.TrimSuffix(w.Bytes(), []byte("\n")))
		if err != nil {
			t.Fatalf("%q: Write gave %q: %v", text, w.Bytes(), err)
		}
		if again.BatchID != l.BatchID || again.AgentID != l.AgentID || again.Sequence != l.Sequence ||
			!slices.EqualFunc(again.Receipts, l.Receipts, bytes.Equal) || (again.Receipts == nil) != (l.Receipts == nil) {
			t.Fatalf("%q: re-encoded as %q: %+v, was %+v", text, w.Bytes(), again, l)
		}
		var was, now any
		if json.Unmarshal(l.Bundle, &was) != nil || json.Unmarshal(again.Bundle, &now) != nil || !reflect.DeepEqual(was, now) {
			t.Fatalf("%q: bundle %q re-encoded as %q", text, l.Bundle, again.Bundle)
		}
		var compact bytes.Buffer
		if json.Compact(&compact, l.Bundle) == nil && bytes.Equal(compact.Bytes(), l.Bundle) &&
			!bytes.ContainsAny(l.Bundle, "<>&\u2028\u2029") && !bytes.Equal(again.Bundle, l.Bundle) {
			t.Fatalf("%q: canonical bundle %q re-encoded as %q", text, l.Bundle, again.Bundle)
		}
		var w2 bytes.Buffer
		if err := Write(&w2, again); err != nil || !bytes.Equal(w2.Bytes(), w.Bytes()) {
			t.Fatalf("%q: written %q, then %q (%v)", text, w.Bytes(), w2.Bytes(), err)
		}
	})
}
