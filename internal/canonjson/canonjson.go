// Package canonjson is a fast RFC 8785 (JCS) canonicaliser, byte-for-byte
// compatible with github.com/gowebpki/jcs (checked by a differential fuzz
// test) on every input nested at most MaxDepth deep, and several times
// faster: strings without escapes are copied, not rebuilt; integers are
// copied, not re-formatted; one output buffer is used.
//
// It does not know about protobuf or artifacts.
package canonjson

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// MaxDepth bounds nesting (deeper input is an error). Re-ordering an
// object's members copies its subtree once, so the work is bounded by
// input size times MaxDepth.
const MaxDepth = 1000

// ErrSyntax wraps every error about the input.
var ErrSyntax = errors.New("invalid JSON")

type member struct {
	key        []byte // decoded key (UTF-8)
	start, end int    // span of `"key":value` in out
}

type canon struct {
	in    []byte
	i     int
	out   []byte
	depth int
	keys  [][]member // per-depth scratch
	tmp   []byte     // scratch: a re-ordered object's members, an escaped string's bytes
}

// maxScratch bounds the scratch a pooled canon keeps between calls.
const maxScratch = 64 << 10

// canons are reused between calls: their scratch slices keep their capacity.
var canons = sync.Pool{New: func() any { return new(canon) }}

func (c *canon) fail(format string, args ...any) error {
	return fmt.Errorf("%w: "+format+" (at byte %d)", append([]any{ErrSyntax}, append(args, c.i)...)...)
}

// Transform returns the RFC 8785 canonical form of data.
func Transform(data []byte) ([]byte, error) {
	if data == nil {
		return nil, fmt.Errorf("%w: no JSON data", ErrSyntax)
	}
	out, err := Append(make([]byte, 0, len(data)), data)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Append appends the RFC 8785 canonical form of data to dst and returns
// the extended buffer (on error, dst may hold part of it). Reusing dst
// makes canonicalising allocation-free once the scratch space is warm.
func Append(dst, data []byte) ([]byte, error) {
	if data == nil {
		return dst, fmt.Errorf("%w: no JSON data", ErrSyntax)
	}
	c := canons.Get().(*canon)
	c.in, c.i, c.out, c.depth = data, 0, dst, 0
	defer func() {
		for k := range c.keys {
			clear(c.keys[k]) // no references into data or out survive
			c.keys[k] = c.keys[k][:0]
		}
		c.in, c.out = nil, nil
		if cap(c.tmp) > maxScratch {
			c.tmp = nil
		}
		canons.Put(c)
	}()
	if err := c.value(); err != nil {
		return c.out, err
	}
	c.ws()
	if c.i != len(c.in) {
		return c.out, c.fail("trailing data")
	}
	return c.out, nil
}

func isWS(b byte) bool { return b == ' ' || b == '\n' || b == '\r' || b == '\t' }

func (c *canon) ws() {
	for c.i < len(c.in) && isWS(c.in[c.i]) {
		c.i++
	}
}

func (c *canon) value() error {
	c.ws()
	if c.i >= len(c.in) {
		return c.fail("unexpected end")
	}
	switch c.in[c.i] {
	case '{':
		c.i++
		return c.object()
	case '[':
		c.i++
		return c.array()
	case '"':
		c.i++
		if c.canonicalString() {
			return nil
		}
		s, raw, err := c.str(true)
		if err != nil {
			return err
		}
		c.out = c.appendString(s, raw)
		return nil
	}
	return c.scalar()
}

func (c *canon) enter() error {
	c.depth++
	if c.depth > MaxDepth {
		return c.fail("nesting deeper than %d", MaxDepth)
	}
	return nil
}

func (c *canon) expect(b byte) error {
	c.ws()
	if c.i >= len(c.in) {
		return c.fail("unexpected end, want %q", b)
	}
	if c.in[c.i] != b {
		return c.fail("want %q, got %q", b, c.in[c.i])
	}
	c.i++
	return nil
}

func (c *canon) peek() (byte, error) {
	c.ws()
	if c.i >= len(c.in) {
		return 0, c.fail("unexpected end")
	}
	if c.in[c.i] > 0x7f {
		return 0, c.fail("unexpected non-ASCII character")
	}
	return c.in[c.i], nil
}

func (c *canon) array() error {
	if err := c.enter(); err != nil {
		return err
	}
	defer func() { c.depth-- }()
	c.out = append(c.out, '[')
	for n := 0; ; n++ {
		b, err := c.peek()
		if err != nil {
			return err
		}
		if b == ']' {
			c.i++
			break
		}
		if n > 0 {
			if err := c.expect(','); err != nil {
				return err
			}
			c.out = append(c.out, ',')
		}
		if err := c.value(); err != nil {
			return err
		}
	}
	c.out = append(c.out, ']')
	return nil
}

func (c *canon) object() error {
	if err := c.enter(); err != nil {
		return err
	}
	defer func() { c.depth-- }()
	for len(c.keys) < c.depth {
		c.keys = append(c.keys, nil)
	}
	ms := c.keys[c.depth-1][:0]
	base := len(c.out)
	c.out = append(c.out, '{')
	sorted := true
	for n := 0; ; n++ {
		b, err := c.peek()
		if err != nil {
			return err
		}
		if b == '}' {
			c.i++
			break
		}
		if n > 0 {
			if err := c.expect(','); err != nil {
				return err
			}
			c.out = append(c.out, ',')
		}
		if err := c.expect('"'); err != nil {
			return err
		}
		key, raw, err := c.str(false)
		if err != nil {
			return err
		}
		start := len(c.out)
		c.out = c.appendString(key, raw)
		if err := c.expect(':'); err != nil {
			return err
		}
		c.out = append(c.out, ':')
		c.keys[c.depth-1] = ms // value() may grow c.keys for deeper levels
		if err := c.value(); err != nil {
			return err
		}
		ms = c.keys[c.depth-1]
		m := member{key: key, start: start, end: len(c.out)}
		if len(ms) > 0 {
			switch cmp := compareKeys(ms[len(ms)-1].key, key); {
			case cmp == 0:
				return c.fail("duplicate key %q", key)
			case cmp > 0:
				sorted = false
			}
		}
		ms = append(ms, m)
	}
	c.keys[c.depth-1] = ms
	if !sorted {
		slices.SortStableFunc(ms, func(a, b member) int { return compareKeys(a.key, b.key) })
		for k := 1; k < len(ms); k++ {
			if compareKeys(ms[k-1].key, ms[k].key) == 0 {
				return c.fail("duplicate key %q", ms[k].key)
			}
		}
		// Member keys alias the input or their own bytes, never out or tmp.
		tmp := append(c.tmp[:0], c.out[base:]...)
		c.out = c.out[:base+1]
		for k, m := range ms {
			if k > 0 {
				c.out = append(c.out, ',')
			}
			c.out = append(c.out, tmp[m.start-base:m.end-base]...)
		}
		c.tmp = tmp[:0]
	}
	c.out = append(c.out, '}')
	return nil
}

// compareKeys orders keys by their UTF-16 code units (RFC 8785 §3.2.3).
func compareKeys(a, b []byte) int {
	ascii := true
	for _, x := range a {
		ascii = ascii && x < 0x80
	}
	for _, x := range b {
		ascii = ascii && x < 0x80
	}
	if ascii {
		return bytes.Compare(a, b)
	}
	ua, ub := utf16.Encode([]rune(string(a))), utf16.Encode([]rune(string(b)))
	for k := 0; k < len(ua) && k < len(ub); k++ {
		if ua[k] != ub[k] {
			return int(ua[k]) - int(ub[k])
		}
	}
	return len(ua) - len(ub)
}

// plain marks the bytes a string body can hold with no escape and no
// UTF-8 check: ASCII from 0x20 up, other than '"' and '\\'.
var plain = func() (t [256]bool) {
	for b := 0x20; b < 0x80; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

// str reads a string body after the opening quote and returns its decoded
// bytes (aliasing the input when it has no escapes). With scratch, the
// decoded bytes of an escaped string may live in c.tmp, valid until the
// next use of c.tmp (a value string, written out at once); without, they
// are the caller's to keep (an object key, kept until its object ends).
// raw reports that the string had no escapes: its bytes then hold no '"',
// '\\' or control character, so its JCS form is the bytes quoted.
func (c *canon) str(scratch bool) (s []byte, raw bool, err error) {
	start := c.i
	ascii := true
	for c.i < len(c.in) {
		b := c.in[c.i]
		switch {
		case plain[b]:
		case b == '"':
			s := c.in[start:c.i]
			c.i++
			if !ascii && !utf8.Valid(s) {
				return nil, false, c.fail("invalid UTF-8 in string")
			}
			return s, true, nil
		case b == '\\':
			if scratch {
				s, err := c.strSlow(start, c.tmp[:0])
				c.tmp = s[:0]
				return s, false, err
			}
			s, err := c.strSlow(start, nil)
			return s, false, err
		case b < 0x20:
			return nil, false, c.fail("control character in string")
		default:
			ascii = false
		}
		c.i++
	}
	return nil, false, c.fail("unterminated string")
}

// canonicalString copies a string value whose body (starting at c.i) is
// already in JCS form and reports whether it did; it leaves c.i alone when
// not. That body is valid UTF-8 with no '"', '\\' or control character
// except in escapes appendQuoted writes the same way again: \" \\ \b \f
// \n \r \t, and \u00xx in lower-case hex for the other control
// characters. Its decoded string, through appendQuoted, is then the body
// itself. Anything else (another escape, an error) is left to str.
func (c *canon) canonicalString() bool {
	start, i := c.i, c.i
	ascii := true
	for i < len(c.in) {
		b := c.in[i]
		switch {
		case plain[b]:
			i++
		case b == '"':
			body := c.in[start:i]
			if !ascii && !utf8.Valid(body) {
				return false
			}
			c.i = i + 1
			c.out = append(c.out, '"')
			c.out = append(c.out, body...)
			c.out = append(c.out, '"')
			return true
		case b == '\\':
			n := canonicalEscape(c.in[i:])
			if n == 0 {
				return false
			}
			i += n
		case b < 0x20:
			return false
		default:
			ascii = false
			i++
		}
	}
	return false
}

// canonicalEscape is the length of the escape at the start of e when
// appendQuoted writes its character back as that same escape, else 0.
func canonicalEscape(e []byte) int {
	if len(e) < 2 {
		return 0
	}
	switch e[1] {
	case '"', '\\', 'b', 'f', 'n', 'r', 't':
		return 2
	case 'u':
		if len(e) < 6 || e[2] != '0' || e[3] != '0' || (e[4] != '0' && e[4] != '1') {
			return 0
		}
		lo := strings.IndexByte(hexDigits, e[5])
		if lo < 0 {
			return 0
		}
		switch r := (e[4]-'0')<<4 | byte(lo); r {
		case '\b', '\f', '\n', '\r', '\t': // written short
			return 0
		}
		return 6
	}
	return 0
}

// appendString writes the string s that str returned: quoted as is when
// raw (appendQuoted would copy every byte), else through appendQuoted.
func (c *canon) appendString(s []byte, raw bool) []byte {
	if raw {
		c.out = append(c.out, '"')
		c.out = append(c.out, s...)
		return append(c.out, '"')
	}
	return appendQuoted(c.out, s)
}

// strSlow decodes the string body at start, appending it to s.
func (c *canon) strSlow(start int, s []byte) ([]byte, error) {
	c.i = start
	for {
		if c.i >= len(c.in) {
			return nil, c.fail("unterminated string")
		}
		b := c.in[c.i]
		switch {
		case b == '"':
			c.i++
			return s, nil
		case b < 0x20:
			return nil, c.fail("control character in string")
		case b == '\\':
			c.i++
			if c.i >= len(c.in) {
				return nil, c.fail("unterminated escape")
			}
			e := c.in[c.i]
			c.i++
			switch e {
			case '"', '\\', '/':
				s = append(s, e)
			case 'b':
				s = append(s, '\b')
			case 'f':
				s = append(s, '\f')
			case 'n':
				s = append(s, '\n')
			case 'r':
				s = append(s, '\r')
			case 't':
				s = append(s, '\t')
			case 'u':
				r, err := c.hex4()
				if err != nil {
					return nil, err
				}
				if utf16.IsSurrogate(r) {
					if r > 0xDBFF {
						return nil, c.fail("lone low surrogate")
					}
					if c.i+2 > len(c.in) || c.in[c.i] != '\\' || c.in[c.i+1] != 'u' {
						return nil, c.fail("missing low surrogate")
					}
					c.i += 2
					lo, err := c.hex4()
					if err != nil {
						return nil, err
					}
					if lo < 0xDC00 || lo > 0xDFFF {
						return nil, c.fail("invalid low surrogate")
					}
					r = utf16.DecodeRune(r, lo)
				}
				s = utf8.AppendRune(s, r)
			default:
				return nil, c.fail("unknown escape \\%c", e)
			}
		case b < 0x80:
			s = append(s, b)
			c.i++
		default:
			r, n := utf8.DecodeRune(c.in[c.i:])
			if r == utf8.RuneError && n <= 1 {
				return nil, c.fail("invalid UTF-8 in string")
			}
			s = append(s, c.in[c.i:c.i+n]...)
			c.i += n
		}
	}
}

func (c *canon) hex4() (rune, error) {
	if c.i+4 > len(c.in) {
		return 0, c.fail("short \\u escape")
	}
	var r rune
	for _, h := range c.in[c.i : c.i+4] {
		r <<= 4
		switch {
		case h >= '0' && h <= '9':
			r |= rune(h - '0')
		case h >= 'a' && h <= 'f':
			r |= rune(h - 'a' + 10)
		case h >= 'A' && h <= 'F':
			r |= rune(h - 'A' + 10)
		default:
			return 0, c.fail("bad \\u escape")
		}
	}
	c.i += 4
	return r, nil
}

const hexDigits = "0123456789abcdef"

// appendQuoted writes s as a JCS string.
func appendQuoted(out, s []byte) []byte {
	out = append(out, '"')
	last := 0
	for k, b := range s {
		var esc string
		switch b {
		case '"':
			esc = `\"`
		case '\\':
			esc = `\\`
		case '\b':
			esc = `\b`
		case '\f':
			esc = `\f`
		case '\n':
			esc = `\n`
		case '\r':
			esc = `\r`
		case '\t':
			esc = `\t`
		default:
			if b >= 0x20 {
				continue
			}
		}
		out = append(out, s[last:k]...)
		if esc != "" {
			out = append(out, esc...)
		} else {
			out = append(out, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
		}
		last = k + 1
	}
	out = append(out, s[last:]...)
	return append(out, '"')
}

// scalar reads a literal or number token.
func (c *canon) scalar() error {
	start := c.i
	for c.i < len(c.in) {
		b := c.in[c.i]
		if b == ',' || b == ']' || b == '}' || isWS(b) {
			break
		}
		if b > 0x7f {
			return c.fail("unexpected non-ASCII character")
		}
		c.i++
	}
	tok := c.in[start:c.i]
	switch string(tok) {
	case "":
		return c.fail("missing value")
	case "true", "false", "null":
		c.out = append(c.out, tok...)
		return nil
	}
	integer, ok := numberToken(tok)
	if !ok {
		return c.fail("invalid literal or number")
	}
	digits := len(tok)
	if tok[0] == '-' {
		digits--
	}
	if integer && digits <= 15 && string(tok) != "-0" {
		c.out = append(c.out, tok...) // an exact integer prints as itself in ES6
		return nil
	}
	f, err := strconv.ParseFloat(string(tok), 64)
	if err != nil {
		return c.fail("number out of range")
	}
	s, err := jcs.NumberToJSON(f)
	if err != nil {
		return c.fail("%v", err)
	}
	c.out = append(c.out, s...)
	return nil
}

// numberToken checks the RFC 8259 number grammar and reports whether the
// number is a plain integer.
func numberToken(t []byte) (integer, ok bool) {
	k := 0
	if k < len(t) && t[k] == '-' {
		k++
	}
	digits := func() int {
		n := 0
		for k < len(t) && t[k] >= '0' && t[k] <= '9' {
			k++
			n++
		}
		return n
	}
	if k < len(t) && t[k] == '0' {
		k++
	} else if digits() == 0 {
		return false, false
	}
	integer = true
	if k < len(t) && t[k] == '.' {
		k++
		integer = false
		if digits() == 0 {
			return false, false
		}
	}
	if k < len(t) && (t[k] == 'e' || t[k] == 'E') {
		k++
		integer = false
		if k < len(t) && (t[k] == '+' || t[k] == '-') {
			k++
		}
		if digits() == 0 {
			return false, false
		}
	}
	return integer, k == len(t)
}
