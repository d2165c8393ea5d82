//go:build !linux

package peercred

import "net"

func peerCred(*net.UnixConn) (Cred, error) { return Cred{}, ErrUnsupported }
