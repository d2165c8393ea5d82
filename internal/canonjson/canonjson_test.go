package canonjson

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
)

var samples = []string{
	`{"b":1,"a":[true,false,null],"c":{"z":"x","y":"\u00e9\n\"q\""}}`,
	`  [1, 2.50, -0, 1e21, 1E-7, 123456789012345678, 0.1, -12]  `,
	`{"\u20ac":1,"\ud83d\ude00":2,"\ufb33":3,"a":4}`,
	`"a\/b\u0001\u001f\t"`,
	`{"a":{"c":1,"b":2},"A":[{"y":1,"x":2}]}`,
	`{}`, `[]`, `""`, `0`, `-1.5e-3`,
	`{"\u0062":1,"a":{"\u0063":2,"\u0061":[{"z\n":0,"y\t":1}]},"\u00e9\u0301":4,"é":5,"\ud83d\ude00":6,"\uffff":7}`,
	`{"aé":1,"a\u00e8":2,"a":3,"ab":4,"a\"":5}`,
	`["a\"b\\c\nd\u0001\u001fé\b\f\r\t", "\u000a", "\u001F", "\u007f", "\u0020", "\u00e9", "\/", "\u0008", "\u0010\u000b"]`,
	`{"t":"{\"echo\":\"benchmark\"}"}`, `"\u00"`, `"\u001"`, `"\u001g"`, "\"\\\"\xff\"", "\"\\n\x01\"",
	`{"a":1,"a":2}`, `{"b\u0061":1,"ba":2}`, `{"x":{"\u0061":1,"a":2}}`, `[1,]`, `{,}`, `tru`, `"\ud800"`, `"\udc00"`, "\"\xff\"", `1 2`, `[01]`, `{"a" 1}`, `[1.]`, `[.5]`, `["x"`, ``, `nul l`,
}

func TestMatchesReference(t *testing.T) {
	for _, s := range samples {
		want, werr := jcs.Transform([]byte(s))
		got, gerr := Transform([]byte(s))
		if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
			t.Errorf("%q: got %q (%v), reference %q (%v)", s, got, gerr, want, werr)
		}
	}
}

func TestDepthLimit(t *testing.T) {
	deep := strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1)
	if _, err := Transform([]byte(deep)); err == nil {
		t.Fatal("accepted nesting beyond MaxDepth")
	}
	ok := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	if _, err := Transform([]byte(ok)); err != nil {
		t.Fatal(err)
	}
}

func FuzzTransformMatchesReference(f *testing.F) {
	for _, s := range samples {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if bytes.Count(b, []byte("["))+bytes.Count(b, []byte("{")) > MaxDepth {
			return
		}
		want, werr := jcs.Transform(b)
		got, gerr := Transform(b)
		if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("%q: got %q (%v), reference %q (%v)", b, got, gerr, want, werr)
		}
	})
}

func BenchmarkTransform(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"receipts":[`)
	for i := 0; i < 256; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`{"receiptId":"06H2F6P87000059W6386P1A0ZG","requested":"docs_lookup","candidates":[{"entry":"docs-a/lookup@1.4.2","serverName":"com.example/docs-a","toolName":"lookup","rejectedAtStep":6,"rejectionReason":"circuit open after 5 failures"}],"argumentsDigest":"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef","latency":"0.025s"}`)
	}
	sb.WriteString(`]}`)
	in := []byte(sb.String())
	b.SetBytes(int64(len(in)))
	b.Run("canonjson", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			Transform(in)
		}
	})
	b.Run("gowebpki", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			jcs.Transform(in)
		}
	})
}

// TestAppendReuse: Append into reused buffers, with pooled scratch, gives
// Transform's output for every sample one after another (no scratch state
// leaks from one input into the next), and leaves dst's prefix alone.
func TestAppendReuse(t *testing.T) {
	buf := []byte("prefix:")
	for round := 0; round < 3; round++ {
		for _, s := range samples {
			want, werr := jcs.Transform([]byte(s))
			out, err := Append(buf[:len("prefix:")], []byte(s))
			if (werr == nil) != (err == nil) {
				t.Fatalf("%q: error %v, reference %v", s, err, werr)
			}
			if !bytes.HasPrefix(out, []byte("prefix:")) {
				t.Fatalf("%q: prefix overwritten: %q", s, out)
			}
			if err == nil && !bytes.Equal(out[len("prefix:"):], want) {
				t.Fatalf("%q: got %q, reference %q", s, out[len("prefix:"):], want)
			}
			buf = out
		}
	}
}

func BenchmarkAppendSmall(b *testing.B) {
	in := []byte(`{"content":[{"type":"text","text":"{\"echo\":\"benchmark\"}"}],"structuredContent":{"echo":"benchmark"}}`)
	b.ReportAllocs()
	var buf []byte
	for b.Loop() {
		buf, _ = Append(buf[:0], in)
	}
}
