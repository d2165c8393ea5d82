//go:build !unix

package demo

// lockDir is a no-op where flock is unavailable.
func lockDir(string) (func(), error) { return func() {}, nil }
