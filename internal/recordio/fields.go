package recordio

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Encoder appends record fields: uvarints and length-prefixed bytes.
type Encoder struct{ B []byte }

// Uvarint appends v.
func (e *Encoder) Uvarint(v uint64) { e.B = binary.AppendUvarint(e.B, v) }

// Bytes appends p with its length.
func (e *Encoder) Bytes(p []byte) { e.Uvarint(uint64(len(p))); e.B = append(e.B, p...) }

// String appends v with its length.
func (e *Encoder) String(v string) { e.Uvarint(uint64(len(v))); e.B = append(e.B, v...) }

// Decoder reads fields written by Encoder. The first failure sticks in Err
// and makes every later read return a zero value.
type Decoder struct {
	B   []byte
	Err error
}

// Uvarint reads a uvarint.
func (d *Decoder) Uvarint() uint64 {
	if d.Err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.B)
	if n <= 0 {
		d.Err = errors.New("bad varint")
		return 0
	}
	d.B = d.B[n:]
	return v
}

// Bytes reads length-prefixed bytes; the result aliases the input.
func (d *Decoder) Bytes() []byte {
	n := d.Uvarint()
	if d.Err != nil {
		return nil
	}
	if n > uint64(len(d.B)) {
		d.Err = fmt.Errorf("field of %d bytes exceeds record", n)
		return nil
	}
	v := d.B[:n:n]
	d.B = d.B[n:]
	return v
}

// String reads a length-prefixed string (a copy).
func (d *Decoder) String() string { return string(d.Bytes()) }

// End fails unless every byte was read.
func (d *Decoder) End() error {
	if d.Err == nil && len(d.B) != 0 {
		d.Err = fmt.Errorf("%d trailing bytes", len(d.B))
	}
	return d.Err
}
