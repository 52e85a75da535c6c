package manifest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const monitorBase = base + "[[services.web.http]]\nport = 80\nhost = \"a.example\"\n"

// TestR76_ManifestMonitor: [services.X.monitor] takes window,
// max_error_rate and min_requests.
func TestR76_ManifestMonitor(t *testing.T) {
	spec, err := Parse("app.toml", []byte(monitorBase+"[services.web.monitor]\nwindow = \"60s\"\nmax_error_rate = 0.05\nmin_requests = 20\n"))
	require.NoError(t, err)
	m := spec.Services[0].Monitor
	require.NotNil(t, m)
	assert.Equal(t, time.Minute, m.Window.D())
	assert.Equal(t, 0.05, m.MaxErrorRate)
	assert.Equal(t, int64(20), m.MinRequests)

	spec, err = Parse("app.toml", []byte(monitorBase))
	require.NoError(t, err)
	assert.Nil(t, spec.Services[0].Monitor)
}

// TestR76_ManifestMonitorRefusals: each malformed monitor is refused at its
// key, saying what would be valid.
func TestR76_ManifestMonitorRefusals(t *testing.T) {
	full := "window = \"60s\"\nmax_error_rate = 0.05\nmin_requests = 20\n"
	checkRefusals(t, []refusalCase{
		{"no http", base + "[services.web.monitor]\n" + full, "services.web.monitor",
			"the monitor measures the error rate of HTTP requests at the edge, and this service declares no [[http]] interface; add one or remove [monitor]"},
		{"window range", monitorBase + "[services.web.monitor]\nwindow = \"5s\"\nmax_error_rate = 0.05\nmin_requests = 20\n", "services.web.monitor.window",
			"5s is out of range: want from 10s to 30m"},
		{"rate range", monitorBase + "[services.web.monitor]\nwindow = \"60s\"\nmax_error_rate = 1.5\nmin_requests = 20\n", "services.web.monitor.max_error_rate",
			"1.5 is out of range: want a share from 0 to 1, such as 0.05 for 5 %"},
		{"min requests", monitorBase + "[services.web.monitor]\nwindow = \"60s\"\nmax_error_rate = 0.05\nmin_requests = 0\n", "services.web.monitor.min_requests",
			"0 is out of range: want at least 1 request"},
		{"missing rate", monitorBase + "[services.web.monitor]\nwindow = \"60s\"\nmin_requests = 20\n", "services.web.monitor.max_error_rate",
			"missing: want the highest tolerated share of 5xx answers, from 0 to 1, such as 0.05"},
		{"unknown key", monitorBase + "[services.web.monitor]\n" + full + "rate = 1\n", "services.web.monitor.rate",
			`unknown key "rate": want one of window, max_error_rate, min_requests`},
	})
}
