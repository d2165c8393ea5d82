package jsonwire

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// MissingKey returns the first of keys that the JSON object data does not
// have at its top level ("" when it has them all). Keys are compared
// exactly, after unescaping, as MCP servers read arguments; empty data and
// null are an object without keys. Data that is not one JSON object is
// ErrSyntax, nesting past MaxDepth ErrTooDeep, and a repeated key inside
// it ErrRepeatedKey. It does not allocate for plain ASCII keys and up to
// 64 keys.
func MissingKey(data []byte, keys []string) (string, error) {
	if len(keys) == 0 {
		return "", nil
	}
	f := found{n: len(keys)}
	if len(keys) > 64 {
		f.big = make([]bool, len(keys))
	}
	if err := eachTopKey(data, func(k []byte) { f.mark(keys, k) }); err != nil {
		return "", err
	}
	for i := range keys {
		if !f.has(i) {
			return keys[i], nil
		}
	}
	return "", nil
}

// CaseVariant returns a top-level key of the JSON object data that is one
// of names ignoring case (as encoding/json matches keys to struct fields)
// without being it, and that name; "" when there is none. A provider
// decoding into a struct reads such a key as the name, while anything
// that reads the name exactly (a policy, an allow-list) does not see it.
// Errors are MissingKey's. It does not allocate for plain ASCII keys and
// names.
func CaseVariant(data []byte, names []string) (key, name string, err error) {
	if len(names) == 0 {
		return "", "", nil
	}
	err = eachTopKey(data, func(k []byte) {
		if key != "" {
			return
		}
		for _, n := range names {
			if string(k) != n && foldEqual(k, n) {
				key, name = string(k), n
				return
			}
		}
	})
	if err != nil {
		return "", "", err
	}
	return key, name, nil
}

// foldEqual reports whether k and n are equal as encoding/json folds keys.
func foldEqual(k []byte, n string) bool {
	if ascii(k) && ascii([]byte(n)) {
		return asciiFoldEqual(k, []byte(n))
	}
	return bytes.Equal(foldKey(string(k)), foldKey(n))
}

func ascii(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// eachTopKey calls f with each top-level key of the JSON object data,
// unescaped (f must not keep it). Empty data and null have no keys; data
// that is not one JSON object is ErrSyntax; the values are checked as
// RepeatedKey checks them.
func eachTopKey(data []byte, f func(k []byte)) error {
	s := keyScanner{data: data}
	s.space()
	if s.i == len(s.data) || isNull(&s) {
		return nil
	}
	if s.data[s.i] != '{' {
		return ErrSyntax
	}
	s.i++
	s.space()
	if s.i < len(s.data) && s.data[s.i] == '}' {
		s.i++
	} else {
		for {
			s.space()
			if s.i >= len(s.data) || s.data[s.i] != '"' {
				return ErrSyntax
			}
			start := s.i
			plain, err := s.str()
			if err != nil {
				return err
			}
			if plain {
				f(s.data[start+1 : s.i-1])
			} else {
				var k string
				if json.Unmarshal(s.data[start:s.i], &k) != nil {
					return ErrSyntax
				}
				f([]byte(k))
			}
			s.space()
			if s.i >= len(s.data) || s.data[s.i] != ':' {
				return ErrSyntax
			}
			s.i++
			if err := s.value(1); err != nil {
				return err
			}
			s.space()
			if s.i >= len(s.data) {
				return ErrSyntax
			}
			if s.data[s.i] == '}' {
				s.i++
				break
			}
			if s.data[s.i] != ',' {
				return ErrSyntax
			}
			s.i++
		}
	}
	s.space()
	if s.i != len(s.data) {
		return ErrSyntax
	}
	return nil
}

// isNull reports whether the rest of s's data is null and spaces.
func isNull(s *keyScanner) bool {
	t := keyScanner{data: s.data, i: s.i}
	if len(t.data)-t.i < 4 || string(t.data[t.i:t.i+4]) != "null" {
		return false
	}
	t.i += 4
	t.space()
	return t.i == len(t.data)
}

// found records which of MissingKey's keys were seen: a bit each for up
// to 64, else big.
type found struct {
	n    int
	bits uint64
	big  []bool
}

// mark marks each of keys equal to k.
func (f *found) mark(keys []string, k []byte) {
	for i, key := range keys {
		if key != string(k) {
			continue
		}
		if f.big != nil {
			f.big[i] = true
		} else {
			f.bits |= 1 << i
		}
	}
}

func (f *found) has(i int) bool {
	if f.big != nil {
		return f.big[i]
	}
	return f.bits&(1<<i) != 0
}
