package chainhead

import (
	"context"
	"sync"

	"github.com/mcpready/mcpready/ledger"
)

// Memory keeps chain heads in this process, under Store's contract: Advance
// compares the version read (a counter standing for etcd's revision) and
// moves head and digest together, and each agent keeps its last Keep batch
// digests. It is for tests and for a control plane with one replica (it is
// package ingest's default); its heads are lost with the process, and
// ingest seeds a missing head from its receipt store. Options.Prefix and
// Timeout do not apply. It is safe for concurrent use and never fails.
type Memory struct {
	keep uint64

	mu     sync.Mutex
	rev    int64
	agents map[string]*memAgent
}

type memAgent struct {
	st      State
	digests map[uint64]string
}

// NewMemory returns an empty Memory.
func NewMemory(o Options) *Memory {
	return &Memory{keep: uint64(o.withDefaults().Keep), agents: map[string]*memAgent{}}
}

// Get returns agent's head; the zero State if none is stored.
func (m *Memory) Get(_ context.Context, agent string) (State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if a := m.agents[agent]; a != nil {
		return a.st, nil
	}
	return State{}, nil
}

// BatchDigest returns the digest of agent's accepted batch at seq, if it
// is still kept.
func (m *Memory) BatchDigest(_ context.Context, agent string, seq uint64) (string, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if a := m.agents[agent]; a != nil {
		d, ok := a.digests[seq]
		return d, ok, nil
	}
	return "", false, nil
}

// Advance is Store.Advance in memory.
func (m *Memory) Advance(_ context.Context, agent string, base State, next ledger.Head) (State, error) {
	if err := checkAdvance(base, next); err != nil {
		return State{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	a := m.agents[agent]
	if a == nil {
		if base.Version != 0 {
			return State{}, ErrConflict
		}
		a = &memAgent{digests: map[uint64]string{}}
		m.agents[agent] = a
	} else if a.st.Version != base.Version {
		return a.st, ErrConflict
	}
	m.rev++
	a.st = State{Head: next, Version: m.rev}
	a.digests[next.Sequence] = next.Digest
	if next.Sequence > m.keep {
		delete(a.digests, next.Sequence-m.keep)
	}
	return a.st, nil
}
