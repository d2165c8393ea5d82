// Package loopback answers one question for every listener and dialler of
// the project: is a host:port address on loopback? It must not resolve
// names (only "localhost" counts as a loopback name), so the answer never
// depends on DNS.
package loopback

import (
	"net"
	"net/url"
)

// Is reports whether addr ("host:port") names a loopback host: localhost,
// or a loopback IPv4 or IPv6 address. An address that does not parse is not
// loopback.
func Is(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && Host(host)
}

// Host reports whether host (no port; a URL's Hostname) is localhost or a
// loopback IPv4 or IPv6 address.
func Host(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Confidential reports whether what is sent to u stays between the two
// ends: u is https, or http to a loopback host. A credential may be sent
// only to such a URL.
func Confidential(u *url.URL) bool {
	return u.Scheme == "https" || (u.Scheme == "http" && Host(u.Hostname()))
}
