// Package recordio frames records in append-only files: a 4-byte
// little-endian length, a 4-byte CRC-32C of the payload, then the payload.
//
// It detects a torn or corrupt tail (short header, short payload, CRC
// mismatch, absurd length) so that the owner can truncate the file back to
// the last whole record. It does not fsync, rotate or interpret payloads;
// the spool and the receipt store do.
package recordio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// HeaderSize is the size of a record header.
const HeaderSize = 8

// MaxRecord bounds one payload (64 MiB).
const MaxRecord = 64 << 20

// ErrCorrupt reports a torn or corrupt record.
var ErrCorrupt = errors.New("corrupt record")

var table = crc32.MakeTable(crc32.Castagnoli)

// Append appends one framed record holding payload to dst.
func Append(dst, payload []byte) []byte {
	var h [HeaderSize]byte
	binary.LittleEndian.PutUint32(h[0:4], uint32(len(payload)))
	binary.LittleEndian.PutUint32(h[4:8], crc32.Checksum(payload, table))
	return append(append(dst, h[:]...), payload...)
}

// Frame frames a record in place: rec is HeaderSize reserved bytes
// followed by the payload (so large payloads are not copied again). It
// fills the header and returns rec.
func Frame(rec []byte) []byte {
	p := rec[HeaderSize:]
	binary.LittleEndian.PutUint32(rec[0:4], uint32(len(p)))
	binary.LittleEndian.PutUint32(rec[4:8], crc32.Checksum(p, table))
	return rec
}

// Size is the framed size of a payload of n bytes.
func Size(n int) int64 { return int64(HeaderSize + n) }

// Next decodes the record at the start of b. It returns the payload (a
// sub-slice of b) and the framed length consumed. An incomplete or corrupt
// record returns an error wrapping ErrCorrupt; io.EOF means b is empty.
func Next(b []byte) (payload []byte, n int, err error) {
	if len(b) == 0 {
		return nil, 0, io.EOF
	}
	if len(b) < HeaderSize {
		return nil, 0, fmt.Errorf("%w: %d-byte partial header", ErrCorrupt, len(b))
	}
	size := binary.LittleEndian.Uint32(b[0:4])
	if size > MaxRecord {
		return nil, 0, fmt.Errorf("%w: length %d exceeds %d", ErrCorrupt, size, MaxRecord)
	}
	if uint64(len(b)-HeaderSize) < uint64(size) {
		return nil, 0, fmt.Errorf("%w: payload of %d bytes cut at %d", ErrCorrupt, size, len(b)-HeaderSize)
	}
	p := b[HeaderSize : HeaderSize+int(size)]
	if crc32.Checksum(p, table) != binary.LittleEndian.Uint32(b[4:8]) {
		return nil, 0, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	return p, HeaderSize + int(size), nil
}

// Scan calls fn for each whole record in b with its offset. It stops at the
// first torn or corrupt record and returns the offset where the valid
// prefix ends together with that error (nil when all of b is valid), or
// the first error fn returns.
func Scan(b []byte, fn func(off int64, payload []byte) error) (validEnd int64, err error) {
	var off int64
	for {
		p, n, err := Next(b[off:])
		if err == io.EOF {
			return off, nil
		}
		if err != nil {
			return off, err
		}
		if err := fn(off, p); err != nil {
			return off, err
		}
		off += int64(n)
	}
}
