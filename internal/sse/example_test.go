package sse_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/mcpready/mcpready/internal/sse"
)

// A tools/call answered over MCP's Streamable HTTP as text/event-stream:
// a priming event with an id and a retry time but no data, a comment, a
// progress notification whose data spans two lines, then the response.
// The caller reads event by event, handles each event's data, and keeps
// the last id and retry time to resume a lost stream.
func ExampleReadEventMeta() {
	body := strings.NewReader("id: 17-0\nretry: 2500\ndata:\n\n" +
		": keep-alive\n\n" +
		"event: message\nid: 17-1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\n" +
		"data: \"params\":{\"progressToken\":\"t1\",\"progress\":50}}\n\n" +
		"event: message\r\nid: 17-2\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"content\":[]}}\r\n\r\n")
	r := bufio.NewReader(body)
	var meta sse.Meta
	for {
		data, err := sse.ReadEventMeta(r, 1<<20, &meta)
		if err == io.EOF {
			fmt.Println("end of stream; resume after", meta.LastID, "in", meta.Retry)
			break
		}
		if err != nil {
			panic(err)
		}
		if len(data) == 0 {
			continue // nothing to handle; its id and retry are in meta
		}
		fmt.Printf("%s\n", data)
	}
	// Output:
	// {"jsonrpc":"2.0","method":"notifications/progress",
	// "params":{"progressToken":"t1","progress":50}}
	// {"jsonrpc":"2.0","id":3,"result":{"content":[]}}
	// end of stream; resume after 17-2 in 2.5s
}

// An event larger than the caller's bound is refused, not buffered.
func ExampleReadEvent() {
	big := "data: " + strings.Repeat("x", 100) + "\n\n"
	r := bufio.NewReader(strings.NewReader("data: ok\n\n" + big))
	for {
		data, err := sse.ReadEvent(r, 64)
		if err != nil {
			fmt.Println(errors.Is(err, sse.ErrTooLarge), err)
			break
		}
		fmt.Printf("%q\n", data)
	}
	// Output:
	// "ok"
	// true sse: event too large: over 64 bytes
}
