package redistest

// Kill ends the server with SIGKILL, as a crash would, and waits for it:
// unlike Stop's SIGTERM, which Redis acts on at its next cron tick (up to
// 100 ms later), it stops serving at once. Restart starts it again.
// Killing a stopped server does nothing.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exit
	s.cmd = nil
}
