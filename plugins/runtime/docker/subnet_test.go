package docker

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// freeSubnet skips every block that overlaps a Docker network or a host
// route, and says so when the pool is full.
func TestRuntime_FreeSubnetSkipsUsedBlocks(t *testing.T) {
	pool := netip.MustParsePrefix("172.16.0.0/16")
	got, ok := freeSubnet(pool, 24, nil)
	require.True(t, ok)
	assert.Equal(t, "172.16.0.0/24", got.String())

	used := []netip.Prefix{
		netip.MustParsePrefix("172.16.0.0/23"),   // two blocks
		netip.MustParsePrefix("172.16.2.128/25"), // part of the third
		netip.MustParsePrefix("10.0.0.0/8"),      // elsewhere
	}
	got, ok = freeSubnet(pool, 24, used)
	require.True(t, ok)
	assert.Equal(t, "172.16.3.0/24", got.String())

	_, ok = freeSubnet(pool, 24, []netip.Prefix{netip.MustParsePrefix("172.16.0.0/12")})
	assert.False(t, ok, "the whole pool is covered")
}

// hostRoutes reads /proc/net/route (little-endian hex) and leaves out the
// default route.
func TestRuntime_HostRoutesFromProcNetRoute(t *testing.T) {
	path := filepath.Join(t.TempDir(), "route")
	require.NoError(t, os.WriteFile(path, []byte(
		"Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"+
			"eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"+
			"docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0\n"+
			"wg0\t0010A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"), 0o644))
	var got []string
	for _, p := range hostRoutes(path) {
		got = append(got, p.String())
	}
	assert.Equal(t, []string{"172.17.0.0/16", "192.168.16.0/24"}, got)
	assert.Empty(t, hostRoutes(filepath.Join(t.TempDir(), "missing")))
}
