package edgeproxy

// SetStopAcceptHook makes s call h when, having handed its listeners
// over, it is about to stop accepting (call it before Run).
func SetStopAcceptHook(s *Server, h func()) { s.stopAcceptHook = h }
