package engine

// ExpForgetLive clears app's live-op mark, as the death of the process
// that claimed the op does (R45).
func (e *Engine) ExpForgetLive(app string) { e.setLive(app, "") }
