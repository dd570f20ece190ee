package agent

import (
	"os"
	"path/filepath"

	"github.com/gantryhq/gantry/agent/wire"
)

// A stateful session's live sandbox outlives its runs, and so do the
// processes it starts (E2B's commands): they reach the egress proxy
// between runs too when the run asked to keep its egress (KeepEgress).
// The relay's socket then stays in the program directory, which the agent
// no longer empties after the run, and its streams go to the runner at
// any time: the agent's reader hands the runner's egress frames to it
// directly rather than to the request in progress. A run without
// KeepEgress closes it (the tenant's egress went away).

// keptEgress returns the kept relay, nil if none.
func (s *server) keptEgress() *egressRelay {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	return s.kept
}

// keepEgress settles the kept relay for req before its run: it closes one
// the run does not keep, and reports whether the run's egress is the
// kept relay (opened by openKept).
func (s *server) keepEgress(req wire.Request) bool {
	keep := req.Stateful && req.Egress && req.KeepEgress
	if !keep {
		s.liveMu.Lock()
		e := s.kept
		s.kept = nil
		s.liveMu.Unlock()
		if e != nil {
			e.close()
		}
	}
	return keep
}

// openKept opens the kept relay in runDir unless it is open.
func (s *server) openKept(runDir string) error {
	if s.keptEgress() != nil {
		return nil
	}
	e, err := openEgress(filepath.Join(runDir, filepath.Base(wire.EgressSocket)), s.fw)
	if err != nil {
		return err
	}
	s.liveMu.Lock()
	s.kept = e
	s.liveMu.Unlock()
	return nil
}

// emptyRunDir empties the program directory but the kept relay's socket.
func (s *server) emptyRunDir(runDir string, keep bool) error {
	if !keep || s.keptEgress() == nil {
		return emptyDir(runDir)
	}
	entries, err := os.ReadDir(runDir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() == filepath.Base(wire.EgressSocket) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(runDir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
