package agent

import "github.com/gantryhq/gantry/agent/wire"

// A session sandbox made ahead (a live spare). Making a stateful session's
// sandbox (the warm interpreter's three forks, its mounts and lock-down,
// then the process service's fork) is most of what a new session's first
// job costs, and an E2B sandbox's create waits for that job. So when a
// session's container is given back to its tenant (clean ended its
// sandbox), the agent makes the next session's sandbox at once, in the
// background, as makeLive would make it for the run: forked from the warm
// interpreter, which holds nothing of any run, with the container's
// environment and the workspace's size (the container's, which a
// session's limits fix: containers serve one limits profile), and its
// process service started. The next stateful run takes it (newLive)
// instead of making one; nothing of the last session can be in it, since
// it was made after that one's sandbox ended and its workspace was
// emptied, from what never saw it.
//
// At most one, and only where the warm interpreter serves (under the
// Container isolation a container serves one session). It follows the
// container's last request as the job spares do (topUpSpares): a run that
// is not stateful drops it, since the container now serves jobs.

// liveSpareMaker makes a spare in the background, delivered on its
// channel (nil if it could not be made).
type liveSpareMaker chan *liveSandbox

// spareLive starts making a session sandbox ahead, unless one is made or
// being made, or the container cannot make one from its warm interpreter
// now.
func (s *server) spareLive() {
	if s.liveSpare != nil || s.cfg.Isolation != wire.Namespaces || s.warm == nil || !s.warm.waitReady(0) {
		return
	}
	ch := make(liveSpareMaker, 1)
	s.liveSpare = ch
	go func() {
		l, err := s.makeLive(0)
		if err != nil {
			ch <- nil
			return
		}
		l.spare = true
		s.startProcesses(l)
		ch <- l
	}()
}

// takeLiveSpare returns the spare, waiting for it if it is being made (it
// is at least as far along as one made now), or nil when there is none or
// it ended meanwhile.
func (s *server) takeLiveSpare() *liveSandbox {
	if s.liveSpare == nil {
		return nil
	}
	l := <-s.liveSpare
	s.liveSpare = nil
	if l != nil && l.isGone() {
		l.conn.Close()
		return nil
	}
	return l
}

// dropLiveSpare ends the spare, if any, unused (in the background: the
// run that drops it does not wait for one being made).
func (s *server) dropLiveSpare() {
	ch := s.liveSpare
	if ch == nil {
		return
	}
	s.liveSpare = nil
	go func() {
		if l := <-ch; l != nil {
			l.kill()
			l.conn.Close()
		}
	}()
}
