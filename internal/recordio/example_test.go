package recordio_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mcpready/mcpready/internal/recordio"
)

// An owner appends framed records to a file. After a crash part of the
// last record may be missing; on reopen Scan replays the whole records
// and says where the valid prefix ends, and the owner cuts the torn tail
// off there before appending again.
func ExampleScan() {
	dir, err := os.MkdirTemp("", "recordio")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	name := filepath.Join(dir, "spool.log")

	var buf []byte
	for _, p := range []string{"batch host-1/1", "batch host-1/2", "batch host-1/3"} {
		buf = recordio.Append(buf, []byte(p))
	}
	// The crash: the third record's last five bytes never reached the disk.
	if err := os.WriteFile(name, buf[:len(buf)-5], 0o600); err != nil {
		panic(err)
	}

	data, err := os.ReadFile(name)
	if err != nil {
		panic(err)
	}
	end, err := recordio.Scan(data, func(off int64, payload []byte) error {
		fmt.Printf("offset %2d: %s\n", off, payload)
		return nil
	})
	fmt.Println("valid up to", end, "of", len(data), "bytes; torn:", errors.Is(err, recordio.ErrCorrupt))
	fmt.Println(err)
	if err := os.Truncate(name, end); err != nil {
		panic(err)
	}

	// A flipped bit is caught by the CRC the same way.
	data = recordio.Append(nil, []byte("batch host-1/1"))
	data[recordio.HeaderSize+3] ^= 0x01
	end, err = recordio.Scan(data, func(int64, []byte) error { return nil })
	fmt.Println(end, err)
	// Output:
	// offset  0: batch host-1/1
	// offset 22: batch host-1/2
	// valid up to 44 of 61 bytes; torn: true
	// corrupt record: payload of 14 bytes cut at 9
	// 0 corrupt record: checksum mismatch
}

// Frame frames a record built in place after HeaderSize reserved bytes,
// here with Encoder's fields; Next and Decoder read it back.
func ExampleFrame() {
	e := recordio.Encoder{B: make([]byte, recordio.HeaderSize)}
	e.Uvarint(7) // a sequence number
	e.String("host-1")
	e.Bytes([]byte(`{"receipt":"r-01"}`))
	rec := recordio.Frame(e.B)
	fmt.Println(len(rec), recordio.Size(len(rec)-recordio.HeaderSize))

	payload, n, err := recordio.Next(rec)
	if err != nil {
		panic(err)
	}
	d := recordio.Decoder{B: payload}
	seq, agent, body := d.Uvarint(), d.String(), d.Bytes()
	fmt.Println(n, seq, agent, string(body), d.End())

	// Fields cut short fail the Decoder: the read returns a zero value and
	// End reports why.
	d = recordio.Decoder{B: payload[:10]}
	fmt.Println(d.Uvarint(), d.String(), d.Bytes() == nil, d.End())
	// Output:
	// 35 35
	// 35 7 host-1 {"receipt":"r-01"} <nil>
	// 7 host-1 true field of 18 bytes exceeds record
}
