package nodelabel

import (
	"slices"
	"testing"
)

func TestLookup(t *testing.T) {
	labels := map[string]string{"region": "eu", "mcpready.dev/host": "a", "tenant-classes": "gold"}
	for _, c := range []struct {
		k    Key
		want string
		ok   bool
	}{{Region, "eu", true}, {Host, "a", true}, {TenantClass, "gold", true}, {Key("other"), "", false}} {
		if v, ok := Lookup(labels, c.k); v != c.want || ok != c.ok {
			t.Fatalf("%s: %q %v", c.k, v, ok)
		}
	}
	if v, _ := Lookup(map[string]string{"tenant-class": "a", "tenant-classes": "b"}, TenantClass); v != "a" {
		t.Fatalf("the singular key comes first: %q", v)
	}
}

func TestSplit(t *testing.T) {
	if got := Split(" a, ,b "); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("%q", got)
	}
	if got := Split(""); got == nil || len(got) != 0 {
		t.Fatalf("empty value: %#v", got)
	}
}
