package sse

import (
	"bufio"
	"errors"
	"strings"
	"testing"
	"time"
)

const maxEvent = 1 << 20

func TestReadEvent(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"one", "event: message\ndata: {\"a\":1}\n\n", []string{`{"a":1}`}},
		{"crlf and id", "id: 7\r\ndata: x\r\n\r\n", []string{"x"}},
		{"multi-line data", "data: a\ndata: b\n\n", []string{"a\nb"}},
		{"comment and leading blanks", "\n\n: ping\ndata: y\n\n", []string{"y"}},
		{"two events", "data: 1\n\ndata: 2\n\n", []string{"1", "2"}},
		{"last event without blank line", "data: z", []string{"z"}},
		{"no space after colon", "data:w\n\n", []string{"w"}},
		// An empty data line is a line of the data (before, it was lost:
		// "x" for "\nx"); an event whose data is empty is skipped.
		{"empty first data line", "data:\ndata: x\n\n", []string{"\nx"}},
		{"empty data only", "data:\n\ndata: y\n\n", []string{"y"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := bufio.NewReader(strings.NewReader(tt.in))
			var got []string
			for {
				d, err := ReadEvent(r, maxEvent)
				if d != nil {
					got = append(got, string(d))
				}
				if err != nil {
					break
				}
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
	// Lines longer than the reader's buffer are gathered.
	long := strings.Repeat("x", 100)
	r := bufio.NewReaderSize(strings.NewReader("data: "+long+"\ndata: "+long+"\n\n"), 16)
	if d, err := ReadEvent(r, maxEvent); err != nil || string(d) != long+"\n"+long {
		t.Fatalf("long lines: %q %v", d, err)
	}
	// The limit is each event's: keep-alives before a small event do not
	// count against it (before, they did, and "ok" was refused).
	r = bufio.NewReader(strings.NewReader(strings.Repeat(": keep-alive\n\n", 10) + "id: 1\n\n" + "data: ok\n\n"))
	if d, err := ReadEvent(r, 64); err != nil || string(d) != "ok" {
		t.Fatalf("after keep-alives: %q %v", d, err)
	}
	// An event over maxEvent is refused.
	r = bufio.NewReaderSize(strings.NewReader("data: "+strings.Repeat("x", maxEvent+1)+"\n\n"), 16)
	if _, err := ReadEvent(r, maxEvent); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("overlong event: %v", err)
	}
}

func FuzzReadEvent(f *testing.F) {
	f.Add("event: message\ndata: {}\n\n")
	f.Add("data: a\r\ndata: b\r\n\r\n: c\n")
	f.Add("id: e1\nretry: 500\n\ndata: x\n\n")
	f.Fuzz(func(t *testing.T, in string) {
		r := bufio.NewReaderSize(strings.NewReader(in), 16)
		var m Meta
		for range len(in) + 2 {
			if _, err := ReadEventMeta(r, maxEvent, &m); err != nil {
				if m.Retry < 0 || strings.ContainsRune(m.LastID, 0) {
					t.Fatalf("meta = %+v", m)
				}
				return
			}
		}
		t.Fatal("readEvent did not reach the end of its input")
	})
}

func TestReadEventMeta(t *testing.T) {
	r := bufio.NewReader(strings.NewReader("id: e1\nretry: 500\ndata: a\n\nid: bad\x00\nretry: x\ndata: b\n\n"))
	var m Meta
	if d, err := ReadEventMeta(r, maxEvent, &m); err != nil || string(d) != "a" || m.LastID != "e1" || m.Retry != 500*time.Millisecond {
		t.Fatalf("first = %q %v %+v", d, err, m)
	}
	if d, err := ReadEventMeta(r, maxEvent, &m); err != nil || string(d) != "b" || m.LastID != "e1" || m.Retry != 500*time.Millisecond {
		t.Fatalf("an id with NUL and a malformed retry change nothing: %q %v %+v", d, err, m)
	}
}
