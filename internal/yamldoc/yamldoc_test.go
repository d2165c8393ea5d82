package yamldoc

import (
	"errors"
	"testing"
)

func TestJSON(t *testing.T) {
	for in, want := range map[string]string{
		"a: 1\n":              `{"a":1}`,
		"---\na: 1\n":         `{"a":1}`,
		"a: 1\n...\n":         `{"a":1}`,
		"a: 1\n---\n":         `{"a":1}`,
		"a: 1\n---\n~\n":      `{"a":1}`,
		"# only\n---\na: 1\n": `{"a":1}`,
		`{"a": [1, 2]}`:       `{"a":[1,2]}`,
	} {
		j, err := JSON([]byte(in))
		if err != nil || string(j) != want {
			t.Errorf("%q: %s, %v; want %s", in, j, err, want)
		}
	}
	for in, want := range map[string]error{
		"a: 1\n---\nb: 2\n":    ErrMoreThanOne,
		"a: 1\n---\n[]\n":      ErrMoreThanOne,
		"- 1\n---\n- 2\n---\n": ErrMoreThanOne,
	} {
		if _, err := JSON([]byte(in)); !errors.Is(err, want) {
			t.Errorf("%q: %v, want %v", in, err, want)
		}
	}
	for _, in := range []string{`{"a":1} {"b":2}`, "a: 1\n...\nb: 2\n", "a: 1\na: 2\n", "a: ["} {
		if _, err := JSON([]byte(in)); err == nil {
			t.Errorf("%q: accepted", in)
		}
	}
}

func FuzzJSON(f *testing.F) {
	f.Add([]byte("a: 1\n---\nb: 2\n"))
	f.Add([]byte(`{"a":1} {}`))
	f.Add([]byte("- x\n...\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = JSON(data)
	})
}
