package policy_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/policy"
)

// --trusted-proxies parsing (CIDRs and bare IPs; errors name the
// entry).
func TestParseTrustedProxies(t *testing.T) {
	got, err := policy.ParseTrustedProxies(" 10.0.0.0/8, 192.168.1.7 ,::1,")
	require.NoError(t, err)
	assert.Equal(t, []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("192.168.1.7/32"),
		netip.MustParsePrefix("::1/128"),
	}, got)
	_, err = policy.ParseTrustedProxies("10.0.0.0/8,nope")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"nope"`)
}
