// Package export reads, writes and verifies receipt exports: JSON lines,
// one signed receipt batch (ledger.Batch) per line: the Sigstore bundle of
// the signed manifest embedded byte for byte as it was signed (bundles are
// single-line canonical JSON) and the receipts exactly as stored
// (protobuf, base64 in JSON).
//
// Verify checks an export offline: every bundle's signature, that every
// receipt hashes to its signed digest, and that each agent's chain has no
// gap, fork, reordering or replay. It names the first batch that fails.
// VerifyAll does the same over several exports of the same chains (one per
// control-plane replica).
// It must not fetch anything (keys and trust come from the caller) and
// must not repair, reorder or drop batches: it reports the first failure.
package export

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/mcpready/mcpready/ledger"
)

// MaxLine bounds one line (64 MiB).
const MaxLine = 64 << 20

// ErrFormat is a malformed export.
var ErrFormat = errors.New("malformed receipt export")

// Write writes one line. bundle must be single-line JSON (as sign.Sign
// produces).
func Write(w io.Writer, l ledger.Batch) error {
	if !json.Valid(l.Bundle) || bytes.ContainsAny(l.Bundle, "\r\n") {
		return fmt.Errorf("%w: batch %s: bundle is not single-line JSON", ErrFormat, l.BatchID)
	}
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// Read calls fn for each line (numbered from 1). Blank lines are skipped;
// unknown fields, a missing bundle or trailing data are errors.
func Read(r io.Reader, fn func(lineNo int, l ledger.Batch) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), MaxLine)
	for n := 1; sc.Scan(); n++ {
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		l, err := parseLine(text)
		if err != nil {
			return fmt.Errorf("%w: line %d: %w", ErrFormat, n, err)
		}
		if err := fn(n, l); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrFormat, err)
	}
	return nil
}

func parseLine(text []byte) (ledger.Batch, error) {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.DisallowUnknownFields()
	var l ledger.Batch
	if err := dec.Decode(&l); err != nil {
		return ledger.Batch{}, err
	}
	// Anything after the object is trailing data (Decoder.More would miss
	// a stray '}' or ']').
	if len(bytes.TrimSpace(text[dec.InputOffset():])) > 0 {
		return ledger.Batch{}, errors.New("trailing data")
	}
	if len(l.Bundle) == 0 || l.Bundle[0] != '{' {
		return ledger.Batch{}, errors.New("bundle must be a JSON object")
	}
	l.Bundle = bytes.Clone(l.Bundle)
	return l, nil
}
