package l4

import "time"

// checkIdle runs when the session's idle timer fires: a connection whose
// client side has neither received nor sent data for idle (everything
// relayed passes through it) is closed both ways; otherwise the timer is
// set for when it would be. Where silence cannot be measured (silentFor)
// the timer stops.
func (s *tcpSession) checkIdle(idle time.Duration) {
	silent, ok := silentFor(s.client)
	if !ok {
		return
	}
	s.idleMu.Lock()
	defer s.idleMu.Unlock()
	if s.idleStopped {
		return
	}
	if silent < idle {
		s.idleTimer.Reset(idle - silent)
		return
	}
	s.t.logger.Debug("tcp relay idle: closed", "listen", s.l.listen, "idle", silent)
	_ = s.client.Close()
	_ = s.upstream().Close()
}

// stopIdle stops the idle timer for good (the relay ended).
func (s *tcpSession) stopIdle() {
	s.idleMu.Lock()
	s.idleStopped = true
	s.idleTimer.Stop()
	s.idleMu.Unlock()
}
