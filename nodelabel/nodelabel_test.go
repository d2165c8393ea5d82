package nodelabel

import (
	"errors"
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

func TestFromCertURIs(t *testing.T) {
	got, err := FromCertURIs([]string{"spiffe://example.org/agent/a", CertURI(Region, "eu-west"), CertURI(TenantClass, "gold"), CertURI(TenantClass, "silver"), CertURI(Region, "eu-west")})
	if err != nil || !slices.Equal(got[Region], []string{"eu-west"}) || !slices.Equal(got[TenantClass], []string{"gold", "silver"}) || len(got) != 2 {
		t.Fatalf("%v %v", got, err)
	}
	for _, bad := range []string{CertURIPrefix + "planet:earth", CertURIPrefix + "region", CertURIPrefix + "region:", CertURIPrefix + "region:a,b", CertURIPrefix + "tenant-classes:gold"} {
		if _, err := FromCertURIs([]string{bad}); !errors.Is(err, ErrCertURI) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if got, err := FromCertURIs([]string{"spiffe://x/y"}); err != nil || got != nil {
		t.Fatalf("no label URIs: %v %v", got, err)
	}
}

func FuzzFromCertURIs(f *testing.F) {
	f.Add(CertURI(Region, "eu-west"))
	f.Add(CertURIPrefix + "host:")
	f.Fuzz(func(t *testing.T, u string) {
		got, err := FromCertURIs([]string{u})
		if err != nil {
			if !errors.Is(err, ErrCertURI) || got != nil {
				t.Fatalf("%q: %v %v", u, got, err)
			}
			return
		}
		for k, vs := range got {
			if !slices.Contains(Dimensions[:], k) || len(vs) != 1 || vs[0] == "" || CertURI(k, vs[0]) != u {
				t.Fatalf("%q gave %v", u, got)
			}
		}
	})
}
