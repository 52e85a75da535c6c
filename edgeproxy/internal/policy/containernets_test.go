package policy

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
)

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func containsAny(list []netip.Prefix, ip string) bool {
	a := netip.MustParseAddr(ip)
	for _, p := range list {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// A container network strictly inside an entry is taken out of it (the
// rest of the entry still holds); an entry inside or equal to a container
// network is kept (named explicitly); other entries are untouched.
func TestNarrowTakesContainerNetworksOutOfBroaderEntries(t *testing.T) {
	nets := prefixes("10.0.1.0/24", "10.0.2.0/24", "172.18.0.0/16")
	out, removed := Narrow(prefixes("10.0.0.0/8", "172.18.0.5/32", "172.18.0.0/16", "192.168.1.0/24"), nets)
	assert.ElementsMatch(t, prefixes("10.0.1.0/24", "10.0.2.0/24"), removed)
	for ip, want := range map[string]bool{
		"10.0.1.7": false, "10.0.2.200": false, // containers, under the broad 10.0.0.0/8
		"10.0.0.1": true, "10.0.3.1": true, "10.255.255.255": true, // the rest of it
		"172.18.0.5": true, "172.18.9.9": true, // 172.18.0.0/16 named explicitly
		"192.168.1.4": true, "192.168.2.1": false,
	} {
		assert.Equal(t, want, containsAny(out, ip), ip)
	}

	// Docker's pools: a broad trusted range loses them all.
	out, _ = Narrow(prefixes("172.16.0.0/12"), DockerPools())
	assert.Empty(t, out)
	out, _ = Narrow(prefixes("192.168.1.5/32"), DockerPools())
	assert.Equal(t, prefixes("192.168.1.5/32"), out, "an address inside a pool is explicit")
}

// Allow entries as strings: narrowed where a container network lies
// inside, untouched (and reported unchanged) otherwise.
func TestNarrowAllowEntries(t *testing.T) {
	nets := prefixes("10.0.1.0/24")
	out, changed := NarrowAllow([]string{"10.0.1.9", "203.0.113.0/24"}, nets)
	assert.False(t, changed)
	assert.Equal(t, []string{"10.0.1.9", "203.0.113.0/24"}, out)
	out, changed = NarrowAllow([]string{"10.0.0.0/16"}, nets)
	assert.True(t, changed)
	assert.NotContains(t, out, "10.0.1.0/24")
	assert.Contains(t, out, "10.0.0.0/24")
	assert.Len(t, out, 8)
}
