package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// The progress time column continues the service's clock through a
// retirement: a stop event without elapsed time of its own, seen after the
// service has run for a while, does not show 0.0s.
func TestProgress_TimeColumnDoesNotRestartAtRetire(t *testing.T) {
	var b bytes.Buffer
	p := newProgressRenderer(&b, false)
	p.event(engine.ProgressEvent{App: "blog", Service: "web", Phase: "switch", Elapsed: 1500 * time.Millisecond})
	p.event(engine.ProgressEvent{App: "blog", Service: "web", Phase: "stop", Detail: "c-old"})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	last := lines[len(lines)-1]
	assert.Contains(t, last, "stop")
	assert.NotContains(t, last, " 0.0s", last)
	assert.Contains(t, last, "1.5s")
}

// TestR72_HookOutputLinesKeepTheirOwnLineOnATerminal: on a terminal the
// renderer redraws a phase's line in place, but each hook output line
// stays visible on its own line, prefixed with the service and hook.
func TestR72_HookOutputLinesKeepTheirOwnLineOnATerminal(t *testing.T) {
	var b bytes.Buffer
	p := newProgressRenderer(&b, true)
	for _, l := range []string{"before_switch: bin/migrate", "before_switch: migrating 1", "before_switch: migrating 2"} {
		p.event(engine.ProgressEvent{App: "blog", Service: "web", Phase: engine.PhaseHook, Detail: l})
	}
	p.finish()
	assert.NotContains(t, b.String(), "\r")
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	assert.Len(t, lines, 3)
	assert.Regexp(t, `^web\s+hook\s+\S+\s+before_switch: migrating 2$`, lines[2])
}
