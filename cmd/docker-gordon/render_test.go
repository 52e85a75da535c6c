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
