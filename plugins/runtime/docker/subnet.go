package docker

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/bits"
	"net/netip"
	"os"
	"strings"

	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
)

// Docker's default address pools (daemon.json default-address-pools; on
// Docker 20.10 172.17-31.0.0/16 and 192.168.0.0/16 in /20s) give about 31
// bridge networks, and every app has its own. When they run out, an app
// network gets a small subnet from gordonPool instead: the first
// gordonSubnetBits-sized block that overlaps no existing Docker network
// and no route of this host (so no LAN or VPN the host reaches).
var gordonPool = netip.MustParsePrefix("172.16.0.0/16")

// gordonSubnetBits: /24 blocks, 254 addresses an app, 256 apps beyond
// Docker's own pools.
const gordonSubnetBits = 24

// poolsExhausted reports the engine's error for a network it has no
// default subnet left for.
func poolsExhausted(err error) bool {
	return err != nil && strings.Contains(err.Error(), "non-overlapping IPv4 address pool")
}

// createInGordonPool creates network name (opts, with an explicit subnet)
// in the first free block of gordonPool; a block the engine finds taken
// (a concurrent creator) is skipped.
func (r *Runtime) createInGordonPool(ctx context.Context, name string, opts client.NetworkCreateOptions) (client.NetworkCreateResult, error) {
	used, err := r.usedSubnets(ctx)
	if err != nil {
		return client.NetworkCreateResult{}, err
	}
	used = append(used, hostRoutes("/proc/net/route")...)
	var lastErr error
	for range 16 {
		sub, ok := freeSubnet(gordonPool, gordonSubnetBits, used)
		if !ok {
			return client.NetworkCreateResult{}, fmt.Errorf("docker's default address pools and docker gordon's %s are all in use (%d networks): remove unused networks (docker network prune) or add default-address-pools to /etc/docker/daemon.json", gordonPool, len(used))
		}
		opts.IPAM = &network.IPAM{Driver: "default", Config: []network.IPAMConfig{{Subnet: sub}}}
		res, err := r.cli.NetworkCreate(ctx, name, opts)
		if err == nil {
			return res, nil
		}
		if !strings.Contains(err.Error(), "overlap") {
			return res, err
		}
		lastErr = err
		used = append(used, sub)
	}
	return client.NetworkCreateResult{}, lastErr
}

// usedSubnets lists the IPv4 subnets of every Docker network.
func (r *Runtime) usedSubnets(ctx context.Context) ([]netip.Prefix, error) {
	res, err := r.cli.NetworkList(ctx, client.NetworkListOptions{})
	if err != nil {
		return nil, err
	}
	var out []netip.Prefix
	for _, nw := range res.Items {
		for _, c := range nw.IPAM.Config {
			if c.Subnet.IsValid() && c.Subnet.Addr().Is4() {
				out = append(out, c.Subnet.Masked())
			}
		}
	}
	return out, nil
}

// freeSubnet returns the first block of /bits in pool that overlaps none of
// used.
func freeSubnet(pool netip.Prefix, bits int, used []netip.Prefix) (netip.Prefix, bool) {
	if bits < pool.Bits() || bits > 32 || !pool.Addr().Is4() {
		return netip.Prefix{}, false
	}
	base := pool.Masked().Addr().As4()
	start := binary.BigEndian.Uint32(base[:])
	step := uint32(1) << (32 - bits)
	n := uint32(1) << (bits - pool.Bits())
next:
	for i := range n {
		var a [4]byte
		binary.BigEndian.PutUint32(a[:], start+i*step)
		cand := netip.PrefixFrom(netip.AddrFrom4(a), bits)
		for _, u := range used {
			if u.Overlaps(cand) {
				continue next
			}
		}
		return cand, true
	}
	return netip.Prefix{}, false
}

// hostRoutes reads the IPv4 routes of this host from path (the
// /proc/net/route format: hex, little-endian destination and mask), the
// default route left out. An unreadable file gives none.
func hostRoutes(path string) []netip.Prefix {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []netip.Prefix
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 8 {
			continue
		}
		dst, err1 := hex.DecodeString(fields[1])
		mask, err2 := hex.DecodeString(fields[7])
		if err1 != nil || err2 != nil || len(dst) != 4 || len(mask) != 4 {
			continue
		}
		ones := bits.OnesCount32(binary.BigEndian.Uint32(mask))
		if ones == 0 {
			continue // the default route
		}
		// Little-endian: the first byte of the address is the last.
		addr := netip.AddrFrom4([4]byte{dst[3], dst[2], dst[1], dst[0]})
		out = append(out, netip.PrefixFrom(addr, ones).Masked())
	}
	return out
}
