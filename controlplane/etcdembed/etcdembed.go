// Package etcdembed runs etcd members inside the control-plane process: a
// single node by default, or a small cluster for tests. It only starts and
// stops etcd; it must not know what the control plane stores, nor read or
// write keys.
package etcdembed

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// ErrStart wraps every failure to start a member.
var ErrStart = errors.New("embedded etcd failed to start")

// Member is one running embedded etcd member.
type Member struct {
	Name      string
	ClientURL string
	PeerURL   string
	etcd      *embed.Etcd
}

// Options configures StartSingle and StartCluster. Zero values are
// documented per field. etcd logs through its own logger at LogLevel.
type Options struct {
	// Dir is the data directory; required.
	Dir string
	// ClientAddr is host:port for clients; "" picks a free loopback port.
	ClientAddr string
	// CompactionRetention is the periodic auto-compaction retention; zero means 1h.
	CompactionRetention time.Duration
	// ProgressNotifyInterval is the watch progress notification period; zero means etcd's default.
	ProgressNotifyInterval time.Duration
	// StartTimeout bounds how long to wait for readiness; zero means 60s.
	StartTimeout time.Duration
	// LogLevel is etcd's own log level (debug, info, warn, error, panic,
	// fatal); "" means "error".
	LogLevel string
	// ClientTLS, when set, serves clients over TLS with these PEM files
	// and requires a client certificate signed by TrustedCA (ClientURL is
	// then https://); the zero value serves plaintext.
	ClientTLS ClientTLS
}

// ClientTLS names the PEM files of etcd's client listener.
type ClientTLS struct {
	CertFile, KeyFile, TrustedCAFile string
}

// StartSingle starts a one-member etcd on loopback.
func StartSingle(o Options) (*Member, error) {
	ms, err := startCluster(o, []string{"default"}, o.ClientAddr)
	if err != nil {
		return nil, err
	}
	return ms[0], nil
}

// StartCluster starts n members on loopback free ports, each in its own
// subdirectory of o.Dir, and waits until the cluster has a leader.
func StartCluster(o Options, n int) ([]*Member, error) {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("m%d", i)
	}
	return startCluster(o, names, "")
}

// freeAttempts is how many times a start on ports picked here is tried:
// a picked port is free when picked but may be taken (by another process,
// or as the ephemeral port of some connection) before etcd binds it.
const freeAttempts = 5

func startCluster(o Options, names []string, clientAddr string) ([]*Member, error) {
	for attempt := 1; ; attempt++ {
		ms, err := startOnce(o, names, clientAddr)
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) || attempt == freeAttempts || clientAddr != "" && len(names) == 1 {
			return ms, err
		}
	}
}

func startOnce(o Options, names []string, clientAddr string) ([]*Member, error) {
	if o.Dir == "" {
		return nil, fmt.Errorf("%w: data directory is required", ErrStart)
	}
	retention := o.CompactionRetention
	if retention == 0 {
		retention = time.Hour
	}
	timeout := o.StartTimeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	members := make([]*Member, len(names))
	var initial []string
	for i, name := range names {
		ca := clientAddr
		if ca == "" || len(names) > 1 {
			p, err := pickPort()
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrStart, err)
			}
			ca = p
		}
		pp, err := pickPort()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrStart, err)
		}
		scheme := "http://"
		if o.ClientTLS.CertFile != "" {
			scheme = "https://"
		}
		members[i] = &Member{Name: name, ClientURL: scheme + ca, PeerURL: "http://" + pp}
		initial = append(initial, name+"="+members[i].PeerURL)
	}
	started := make(chan error, len(members))
	for _, m := range members {
		cfg := embed.NewConfig()
		cfg.Name = m.Name
		cfg.Dir = o.Dir
		if len(members) > 1 {
			cfg.Dir = filepath.Join(o.Dir, m.Name)
		}
		cu, _ := url.Parse(m.ClientURL)
		pu, _ := url.Parse(m.PeerURL)
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
		cfg.InitialCluster = strings.Join(initial, ",")
		cfg.InitialClusterToken = "mcpready"
		cfg.AutoCompactionMode = embed.CompactorModePeriodic
		cfg.AutoCompactionRetention = retention.String()
		if o.ProgressNotifyInterval > 0 {
			cfg.WatchProgressNotifyInterval = o.ProgressNotifyInterval
		}
		cfg.LogLevel = o.LogLevel
		if cfg.LogLevel == "" {
			cfg.LogLevel = "error"
		}
		cfg.EnableGRPCGateway = false
		if t := o.ClientTLS; t.CertFile != "" {
			cfg.ClientTLSInfo.CertFile, cfg.ClientTLSInfo.KeyFile, cfg.ClientTLSInfo.TrustedCAFile = t.CertFile, t.KeyFile, t.TrustedCAFile
			cfg.ClientTLSInfo.ClientCertAuth = true
		}
		e, err := embed.StartEtcd(cfg)
		if err != nil {
			closeAll(members)
			return nil, fmt.Errorf("%w: member %s: %w", ErrStart, m.Name, err)
		}
		m.etcd = e
		go func(e *embed.Etcd) {
			select {
			case <-e.Server.ReadyNotify():
				started <- nil
			case err := <-e.Err():
				started <- err
			case <-time.After(timeout):
				started <- errors.New("timed out waiting for readiness")
			}
		}(e)
	}
	for range members {
		if err := <-started; err != nil {
			closeAll(members)
			return nil, fmt.Errorf("%w: %w", ErrStart, err)
		}
	}
	return members, nil
}

// Endpoints returns the client URLs of ms.
func Endpoints(ms []*Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ClientURL
	}
	return out
}

// IsLeader reports whether m is currently the raft leader.
func (m *Member) IsLeader() bool {
	return m.etcd != nil && m.etcd.Server.Leader() == m.etcd.Server.MemberID()
}

// Close stops the member; it is safe to call twice.
func (m *Member) Close() {
	if m.etcd != nil {
		m.etcd.Close()
		m.etcd = nil
	}
}

func closeAll(ms []*Member) {
	for _, m := range ms {
		if m != nil {
			m.Close()
		}
	}
}

// pickPort picks a free loopback port (a variable for tests).
var pickPort = freePort

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
