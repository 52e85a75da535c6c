package subnetaddr

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A "CIDR:PORT" address binds this machine's address inside the subnet
// only (loopback here stands for the control overlay); any other address
// is left as it is; a subnet no interface is in is refused, naming it.
func TestResolve_BindsOnlyTheAddressInsideTheSubnet(t *testing.T) {
	got, err := Resolve(context.Background(), "127.0.0.0/8:9180", time.Second)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:9180", got)
	for _, plain := range []string{":9180", "0.0.0.0:9180", "127.0.0.1:0"} {
		got, err := Resolve(context.Background(), plain, 0)
		require.NoError(t, err)
		assert.Equal(t, plain, got)
	}
	_, err = Resolve(context.Background(), "198.51.100.0/24:9180", 0)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "198.51.100.0/24")
}

func TestWithin_KeepsOnlyTheSubnetsAddresses(t *testing.T) {
	p := netip.MustParsePrefix("10.0.9.0/24")
	assert.Equal(t, []string{"10.0.9.4", "10.0.9.7"}, Within(p, []string{"10.0.9.4", "10.0.3.4", "10.0.9.7", "junk"}))
}
