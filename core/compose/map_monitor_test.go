package compose

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// R76: x-gordon.monitor maps onto [services.X.monitor]; the manifest's
// ranges apply.
func TestR76_ComposeXGordonMonitor(t *testing.T) {
	dir := writeProject(t, map[string]string{"compose.yaml": `
name: shop
services:
  web:
    image: web:1
    expose: ["8080"]
    x-gordon: { host: shop.example.com, monitor: { window: 60s, max_error_rate: 0.05, min_requests: 20 } }
`})
	res, err := load(t, dir, "compose.yaml")
	require.NoError(t, err)
	m := svcOf(t, res.Spec, "web").Monitor
	require.NotNil(t, m)
	assert.Equal(t, time.Minute, m.Window.D())
	assert.Equal(t, 0.05, m.MaxErrorRate)
	assert.Equal(t, int64(20), m.MinRequests)

	dir = writeProject(t, map[string]string{"compose.yaml": `
name: shop
services:
  web:
    image: web:1
    expose: ["8080"]
    x-gordon: { host: shop.example.com, monitor: { window: 60s, max_error_rate: 2, min_requests: 20 } }
`})
	_, err = load(t, dir, "compose.yaml")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "max_error_rate")
	assert.Contains(t, err.Error(), "want a share from 0 to 1")
}
