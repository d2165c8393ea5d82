package jsonwire

import "encoding/json"

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
	s := keyScanner{data: data}
	s.space()
	if s.i == len(s.data) || isNull(&s) {
		return keys[0], nil
	}
	if s.data[s.i] != '{' {
		return "", ErrSyntax
	}
	f := found{n: len(keys)}
	if len(keys) > 64 {
		f.big = make([]bool, len(keys))
	}
	s.i++
	s.space()
	if s.i < len(s.data) && s.data[s.i] == '}' {
		s.i++
	} else {
		for {
			s.space()
			if s.i >= len(s.data) || s.data[s.i] != '"' {
				return "", ErrSyntax
			}
			start := s.i
			plain, err := s.str()
			if err != nil {
				return "", err
			}
			if plain {
				f.mark(keys, s.data[start+1:s.i-1])
			} else {
				var k string
				if json.Unmarshal(s.data[start:s.i], &k) != nil {
					return "", ErrSyntax
				}
				f.mark(keys, []byte(k))
			}
			s.space()
			if s.i >= len(s.data) || s.data[s.i] != ':' {
				return "", ErrSyntax
			}
			s.i++
			if err := s.value(1); err != nil {
				return "", err
			}
			s.space()
			if s.i >= len(s.data) {
				return "", ErrSyntax
			}
			if s.data[s.i] == '}' {
				s.i++
				break
			}
			if s.data[s.i] != ',' {
				return "", ErrSyntax
			}
			s.i++
		}
	}
	s.space()
	if s.i != len(s.data) {
		return "", ErrSyntax
	}
	for i := range keys {
		if !f.has(i) {
			return keys[i], nil
		}
	}
	return "", nil
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
