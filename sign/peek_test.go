package sign_test

import (
	"errors"
	"testing"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/internal/testpki"
	"github.com/mcpready/mcpready/sign"
)

func TestPeek(t *testing.T) {
	p := testpki.New(t)
	b := testpki.Sign(t, testpki.Policy("org/p", "7", map[string]string{"a": "b"}), p.Org)
	obj, err := sign.Peek(b)
	if err != nil || obj.Kind != artifact.KindPolicy || obj.Metadata.Name != "org/p" || obj.Metadata.Labels["a"] != "b" {
		t.Fatalf("%v %v", obj, err)
	}
	for _, bad := range []string{"", "{}", `{"dsseEnvelope":{"payload":"e30="}}`, `{"dsseEnvelope":{"payload":"!"}}`, "[1]"} {
		if _, err := sign.Peek([]byte(bad)); !errors.Is(err, sign.ErrPeek) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func FuzzPeek(f *testing.F) {
	f.Add([]byte(`{"dsseEnvelope":{"payload":"e30="}}`))
	f.Add([]byte(`{"dsseEnvelope":{"payload":"eyJwcmVkaWNhdGUiOnsiYXBpVmVyc2lvbiI6Im1jcHJlYWR5LmRldi92MSJ9fQ=="}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		obj, err := sign.Peek(b)
		if err == nil && obj == nil {
			t.Fatal("nil object without error")
		}
		if err != nil && !errors.Is(err, sign.ErrPeek) {
			t.Fatalf("unexpected error type: %v", err)
		}
	})
}
