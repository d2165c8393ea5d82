package recordio

import (
	"bytes"
	"errors"
	"testing"
)

func TestScanDetectsTornTail(t *testing.T) {
	var b []byte
	b = Append(b, []byte("one"))
	b = Append(b, []byte("two"))
	whole := int64(len(b))
	b = Append(b, []byte("three"))
	for cut := int(whole); cut < len(b); cut++ {
		var got [][]byte
		end, err := Scan(b[:cut], func(_ int64, p []byte) error { got = append(got, p); return nil })
		if cut == int(whole) {
			if err != nil {
				t.Fatalf("cut at boundary: %v", err)
			}
		} else if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("cut %d: err %v", cut, err)
		}
		if end != whole || len(got) != 2 {
			t.Fatalf("cut %d: end %d records %d", cut, end, len(got))
		}
	}
	flipped := bytes.Clone(b)
	flipped[len(flipped)-1] ^= 1
	if end, err := Scan(flipped, func(int64, []byte) error { return nil }); end != whole || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("bit flip: end %d err %v", end, err)
	}
}

func FuzzNext(f *testing.F) {
	f.Add(Append(nil, []byte("hello")))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	f.Add([]byte{1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		end, _ := Scan(b, func(off int64, p []byte) error {
			if !bytes.Equal(Append(nil, p), b[off:off+Size(len(p))]) {
				t.Fatal("record does not re-encode to its bytes")
			}
			return nil
		})
		if end < 0 || end > int64(len(b)) {
			t.Fatalf("end %d out of range", end)
		}
	})
}

func TestFrameMatchesAppend(t *testing.T) {
	for _, p := range [][]byte{nil, []byte("x"), bytes.Repeat([]byte("receipt"), 1000)} {
		rec := Frame(append(make([]byte, HeaderSize), p...))
		if want := Append(nil, p); !bytes.Equal(rec, want) {
			t.Fatalf("Frame(%d bytes) = %x, want %x", len(p), rec[:HeaderSize], want[:HeaderSize])
		}
	}
}
