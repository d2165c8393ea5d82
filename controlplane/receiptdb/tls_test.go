package receiptdb

import (
	"errors"
	"strings"
	"testing"
)

func TestParseConfigRequiresTLSOffLoopback(t *testing.T) {
	for dsn, want := range map[string]error{
		"postgres://u@127.0.0.1:5432/db?sslmode=disable":                                        nil,
		"postgres://u@localhost/db":                                                             nil,
		"postgres://u@[::1]:5432/db?sslmode=disable":                                            nil,
		"host=/var/run/postgresql dbname=db":                                                    nil,
		"postgres://u@db.example:5432/db?sslmode=verify-full":                                   nil,
		"postgres://u@db.example:5432/db?sslmode=require":                                       nil,
		"postgres://u@db.example:5432/db?sslmode=disable":                                       ErrInsecure,
		"postgres://u@db.example:5432/db":                                                       ErrInsecure, // prefer falls back to plaintext
		"postgres://u@db.example:5432/db?sslmode=allow":                                         ErrInsecure,
		"postgres://u@10.0.0.7,db.example/db?sslmode=prefer":                                    ErrInsecure,
		"postgres://u@127.0.0.1,db.example/db?sslmode=disable":                                  ErrInsecure,
		"postgres://u:secret@db.example:5432/db?sslmode=nonsense":                               ErrConfig,
		"postgres://u:secret@db.example/db?sslmode=verify-full&sslrootcert=/nonexistent/ca.crt": ErrConfig,
	} {
		_, err := ParseConfig(dsn)
		if !errors.Is(err, want) || (want == nil && err != nil) {
			t.Errorf("%s: %v, want %v", dsn, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: error text carries the password: %v", dsn, err)
		}
	}
}

func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{"postgres://u@db.example/db?sslmode=require", "host=h sslmode=disable", "postgres://[::1", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, dsn string) {
		cfg, err := ParseConfig(dsn)
		if (cfg == nil) == (err == nil) {
			t.Fatalf("ParseConfig(%q) = %v, %v", dsn, cfg, err)
		}
	})
}
