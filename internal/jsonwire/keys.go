package jsonwire

// Repeated object keys. A JSON object that names one key twice is read one
// way by a parser that keeps the last value (encoding/json, the go-sdk,
// JavaScript, Python) and another way by one that keeps the first; one
// whose keys differ only in case is read two ways by a case-sensitive
// parser and by encoding/json, which matches keys to struct fields
// ignoring case. A policy checked on one reading and run on the other is
// not the policy that ran, so the agent refuses such arguments (RepeatedKey).

import (
	"encoding/json"
	"errors"
	"unicode"
	"unicode/utf8"
)

// ErrRepeatedKey is returned for an object that has one key twice: after
// unescaping, and ignoring case as encoding/json does when it matches keys
// to struct fields. The error never names the key.
var ErrRepeatedKey = errors.New("json: an object has the same key twice (compared ignoring case)")

// ErrSyntax is returned by RepeatedKey for data that is not one JSON value.
var ErrSyntax = errors.New("json: malformed value")

// smallObject is the number of keys up to which an object's keys are
// compared pairwise; larger objects use a set.
const smallObject = 16

// RepeatedKey returns ErrRepeatedKey when an object anywhere in data has
// the same key twice (see ErrRepeatedKey), ErrTooDeep when data nests
// deeper than MaxDepth and ErrSyntax when data is not one JSON value
// (checked only as far as finding the keys needs). It does not allocate
// for objects of plain ASCII keys with at most 16 keys.
func RepeatedKey(data []byte) error {
	s := keyScanner{data: data}
	if err := s.value(0); err != nil {
		return err
	}
	s.space()
	if s.i != len(s.data) {
		return ErrSyntax
	}
	return nil
}

type keyScanner struct {
	data []byte
	i    int
}

func (s *keyScanner) space() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\r', '\n':
			s.i++
		default:
			return
		}
	}
}

func (s *keyScanner) value(depth int) error {
	s.space()
	if s.i >= len(s.data) {
		return ErrSyntax
	}
	switch s.data[s.i] {
	case '{':
		if depth >= MaxDepth {
			return ErrTooDeep
		}
		return s.object(depth + 1)
	case '[':
		if depth >= MaxDepth {
			return ErrTooDeep
		}
		return s.array(depth + 1)
	case '"':
		_, err := s.str()
		return err
	}
	start := s.i // a number or a literal
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ',', '}', ']', ' ', '\t', '\r', '\n', '"', '{', '[', ':':
			if s.i == start {
				return ErrSyntax
			}
			return nil
		}
		s.i++
	}
	return nil
}

func (s *keyScanner) array(depth int) error {
	s.i++ // '['
	s.space()
	if s.i < len(s.data) && s.data[s.i] == ']' {
		s.i++
		return nil
	}
	for {
		if err := s.value(depth); err != nil {
			return err
		}
		s.space()
		if s.i >= len(s.data) {
			return ErrSyntax
		}
		switch s.data[s.i] {
		case ',':
			s.i++
		case ']':
			s.i++
			return nil
		default:
			return ErrSyntax
		}
	}
}

func (s *keyScanner) object(depth int) error {
	s.i++ // '{'
	var small [smallObject][]byte
	keys := small[:0]
	var set map[string]struct{}
	s.space()
	if s.i < len(s.data) && s.data[s.i] == '}' {
		s.i++
		return nil
	}
	for {
		s.space()
		if s.i >= len(s.data) || s.data[s.i] != '"' {
			return ErrSyntax
		}
		k, err := s.key()
		if err != nil {
			return err
		}
		switch {
		case set != nil:
			if err := addFolded(set, k); err != nil {
				return err
			}
		case len(keys) < smallObject:
			for _, o := range keys {
				if asciiFoldEqual(o, k) {
					return ErrRepeatedKey
				}
			}
			keys = append(keys, k)
		default:
			set = make(map[string]struct{}, 2*smallObject)
			for _, o := range append(keys, k) {
				if err := addFolded(set, o); err != nil {
					return err
				}
			}
		}
		s.space()
		if s.i >= len(s.data) || s.data[s.i] != ':' {
			return ErrSyntax
		}
		s.i++
		if err := s.value(depth); err != nil {
			return err
		}
		s.space()
		if s.i >= len(s.data) {
			return ErrSyntax
		}
		switch s.data[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return ErrSyntax
		}
	}
}

// addFolded adds key k to set, in upper case, or returns ErrRepeatedKey.
func addFolded(set map[string]struct{}, k []byte) error {
	u := make([]byte, len(k))
	for i, c := range k {
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		u[i] = c
	}
	if _, dup := set[string(u)]; dup {
		return ErrRepeatedKey
	}
	set[string(u)] = struct{}{}
	return nil
}

// key reads the string at s.i and returns its comparison form: its bytes
// when they are plain ASCII without escapes (compared ignoring ASCII
// case), else the unescaped string folded as encoding/json folds a key.
func (s *keyScanner) key() ([]byte, error) {
	start := s.i
	plain, err := s.str()
	switch {
	case err != nil:
		return nil, err
	case plain:
		return s.data[start+1 : s.i-1], nil
	}
	var str string
	if json.Unmarshal(s.data[start:s.i], &str) != nil {
		return nil, ErrSyntax
	}
	return foldKey(str), nil
}

// str skips the string at s.i, reporting whether it is plain ASCII
// without escapes.
func (s *keyScanner) str() (plain bool, err error) {
	s.i++ // '"'
	plain = true
	for s.i < len(s.data) {
		switch c := s.data[s.i]; {
		case c == '"':
			s.i++
			return plain, nil
		case c == '\\':
			plain = false
			s.i += 2
		case c < 0x20:
			return false, ErrSyntax
		default:
			if c >= utf8.RuneSelf {
				plain = false
			}
			s.i++
		}
	}
	return false, ErrSyntax
}

// foldKey is k as encoding/json folds an object key to match it to a
// struct field: ASCII letters in upper case, any other rune r as
// unicode.ToUpper(unicode.ToLower(r)).
func foldKey(k string) []byte {
	out := make([]byte, 0, len(k))
	for _, r := range k {
		if r < utf8.RuneSelf {
			if 'a' <= r && r <= 'z' {
				r -= 'a' - 'A'
			}
			out = append(out, byte(r))
			continue
		}
		out = utf8.AppendRune(out, unicode.ToUpper(unicode.ToLower(r)))
	}
	return out
}

// asciiFoldEqual reports whether a and b are equal ignoring ASCII case.
func asciiFoldEqual(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x == y {
			continue
		}
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
