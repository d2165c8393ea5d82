// Package sse reads Server-Sent Events streams (the text/event-stream
// framing that MCP's Streamable HTTP transport uses): event by event, with
// a bound on the size of one event.
//
// It only frames events: it never interprets their data (JSON-RPC or
// otherwise), and never reconnects (Meta is what a caller that does needs).
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
)

// ErrTooLarge is an event larger than the caller's bound.
var ErrTooLarge = errors.New("sse: event too large")

// Meta is what a stream's events said about resuming it: the last event
// id and the reconnection time (the retry field), each as last seen.
type Meta struct {
	LastID string
	Retry  time.Duration
}

// ReadEventMeta is ReadEvent that also records the id and retry fields of
// the events it reads in m.
func ReadEventMeta(r *bufio.Reader, limit int, m *Meta) ([]byte, error) {
	return readEvent(r, limit, m)
}

// ReadEvent returns the data of the next event in r that has any (an
// event whose data is empty, such as a comment, a keep-alive or an id
// alone, is skipped, as an EventSource dispatches none for it); several
// data lines are joined with "\n", empty ones included. An event over
// limit bytes is refused with ErrTooLarge (each event counted on its own);
// io.EOF (or the reader's error) ends the stream.
func ReadEvent(r *bufio.Reader, limit int) ([]byte, error) {
	return readEvent(r, limit, nil)
}

func readEvent(r *bufio.Reader, limit int, m *Meta) ([]byte, error) {
	var data []byte
	size, lines := 0, 0 // the event's bytes and data lines so far
	var long []byte     // a line longer than r's buffer, gathered
	for {
		line, err := r.ReadSlice('\n')
		size += len(line)
		if size > limit {
			return nil, fmt.Errorf("%w: over %d bytes", ErrTooLarge, limit)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long, line...)
			continue
		}
		if long != nil {
			line, long = append(long, line...), nil
		}
		if err != nil && (len(line) == 0 || !errors.Is(err, io.EOF)) {
			return nil, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			if err != nil || len(data) > 0 {
				return data, err
			}
			data, size, lines = nil, 0, 0 // an event without data: the next one starts
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "data":
			if lines > 0 {
				data = append(data, '\n')
			}
			data, lines = append(data, value...), lines+1
		case "id":
			if m != nil && !bytes.ContainsRune(value, 0) {
				m.LastID = string(value)
			}
		case "retry":
			if ms, err := strconv.ParseUint(string(value), 10, 32); m != nil && err == nil {
				m.Retry = time.Duration(ms) * time.Millisecond
			}
		}
		if err != nil {
			return data, nil
		}
	}
}
