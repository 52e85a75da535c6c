package httpprobe

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestR31_ClientIgnoresProxyAndRedirects checks the client shape directly:
// Go's environment proxy already skips loopback targets, so the behavioural
// test alone could not tell a nil Proxy from ProxyFromEnvironment.
func TestR31_ClientIgnoresProxyAndRedirects(t *testing.T) {
	c := newClient(2 * time.Second)
	tr, ok := c.Transport.(*http.Transport)
	require.True(t, ok)
	assert.Nil(t, tr.Proxy, "proxy environment ignored")
	assert.True(t, tr.DisableKeepAlives)
	assert.Equal(t, 2*time.Second, c.Timeout)
	require.NotNil(t, c.CheckRedirect)
	assert.ErrorIs(t, c.CheckRedirect(nil, nil), http.ErrUseLastResponse)
}
