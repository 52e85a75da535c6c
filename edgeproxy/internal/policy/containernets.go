package policy

import (
	"net"
	"net/netip"
	"os"
	"strings"

	"github.com/gordon-deploy/docker-gordon/core/access"
)

// Container networks. App containers reach the edge's public ports from
// their own addresses (through their bridge's gateway on one engine, on
// the overlays on a swarm), so a range an operator or a manifest means as
// "internal" (10.0.0.0/8, 172.16.0.0/12) also holds every app container.
// The edge therefore takes out of each --trusted-proxies and allow entry
// every container network strictly inside it: an app container is then
// neither a trusted proxy (its X-Forwarded-For is not believed) nor
// admitted by a broad allow range. An entry inside a container network
// (that network itself, or addresses in it) is kept: naming it is the
// explicit choice.

// DockerPools are the blocks Docker hands bridge networks from when
// daemon.json sets no default-address-pools (172.17.0.0/16 to
// 172.31.0.0/16, 192.168.0.0/16 in /20s), and the /24s docker gordon uses
// when those run out (172.16.0.0/16). A trusted-proxies entry covering
// one is narrowed even before a network exists there.
func DockerPools() []netip.Prefix {
	var out []netip.Prefix
	for b := 17; b <= 31; b++ {
		out = append(out, netip.PrefixFrom(netip.AddrFrom4([4]byte{172, byte(b), 0, 0}), 16))
	}
	for b := 0; b < 256; b += 16 {
		out = append(out, netip.PrefixFrom(netip.AddrFrom4([4]byte{192, 168, byte(b), 0}), 20))
	}
	for b := 0; b < 256; b++ {
		out = append(out, netip.PrefixFrom(netip.AddrFrom4([4]byte{172, 16, byte(b), 0}), 24))
	}
	return out
}

// DetectContainerNets returns the container networks the edge sees now:
// the subnets of Docker's bridges on this host (interfaces docker0,
// docker_gwbridge, br-*) when the edge is on the host's network; when
// none is visible and the edge runs in a container (/.dockerenv), it has
// a network namespace of its own (a swarm edge task) whose every
// interface is on a Docker network, so all their subnets. Loopback and
// link-local addresses are never container networks.
func DetectContainerNets() []netip.Prefix {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil
	}
	var bridges, all []netip.Prefix
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		nets := interfaceNets(ifc)
		all = append(all, nets...)
		if ifc.Name == "docker0" || ifc.Name == "docker_gwbridge" || strings.HasPrefix(ifc.Name, "br-") {
			bridges = append(bridges, nets...)
		}
	}
	if len(bridges) > 0 {
		return bridges
	}
	if _, err := os.Stat("/.dockerenv"); err == nil {
		return all
	}
	return nil
}

func interfaceNets(ifc net.Interface) []netip.Prefix {
	addrs, err := ifc.Addrs()
	if err != nil {
		return nil
	}
	var out []netip.Prefix
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(n.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		if ip.IsLoopback() || ip.IsLinkLocalUnicast() {
			continue
		}
		bits, _ := n.Mask.Size()
		if ip.Is4() && bits > 32 {
			bits -= 96
		}
		out = append(out, netip.PrefixFrom(ip, bits).Masked())
	}
	return out
}

// Narrow returns list with every network of nets that lies strictly
// inside an entry taken out of that entry (the entry is split into the
// prefixes around it), and the networks taken out. Entries inside or
// equal to a network of nets, and entries that hold none, are kept as
// they are.
func Narrow(list, nets []netip.Prefix) (out, removed []netip.Prefix) {
	for _, p := range list {
		p = p.Masked()
		if insideAny(p, nets) {
			out = append(out, p) // named explicitly
			continue
		}
		parts := []netip.Prefix{p}
		for _, c := range nets {
			c = c.Masked()
			if !(c.Bits() > p.Bits() && p.Contains(c.Addr())) {
				continue
			}
			removed = append(removed, c)
			var next []netip.Prefix
			for _, q := range parts {
				switch {
				case c.Bits() > q.Bits() && q.Contains(c.Addr()):
					next = append(next, subtract(q, c)...)
				case c.Bits() <= q.Bits() && c.Contains(q.Addr()):
					// inside c: dropped
				default:
					next = append(next, q)
				}
			}
			parts = next
		}
		out = append(out, parts...)
	}
	return out, removed
}

// insideAny reports whether p lies inside (or equals) a network of nets.
func insideAny(p netip.Prefix, nets []netip.Prefix) bool {
	for _, c := range nets {
		if c.Bits() <= p.Bits() && c.Masked().Contains(p.Addr()) {
			return true
		}
	}
	return false
}

// subtract returns q without c, where c lies strictly inside q: the
// sibling of every prefix on the way from q down to c.
func subtract(q, c netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for bits := q.Bits() + 1; bits <= c.Bits(); bits++ {
		towardC := netip.PrefixFrom(c.Addr(), bits).Masked()
		out = append(out, sibling(towardC))
	}
	return out
}

// sibling is the other half of p's parent prefix.
func sibling(p netip.Prefix) netip.Prefix {
	b := p.Addr().AsSlice()
	i := (p.Bits() - 1) / 8
	b[i] ^= 1 << (7 - uint((p.Bits()-1)%8))
	a, _ := netip.AddrFromSlice(b)
	return netip.PrefixFrom(a, p.Bits())
}

// NarrowAllow is Narrow for a route's allow entries (access.ParseAllow
// forms); entries that do not parse are kept for the route's validation
// to refuse. changed reports whether any entry was narrowed.
func NarrowAllow(entries []string, nets []netip.Prefix) (out []string, changed bool) {
	if len(nets) == 0 {
		return entries, false
	}
	for _, e := range entries {
		p, err := access.ParseAllow(e)
		if err != nil {
			out = append(out, e)
			continue
		}
		parts, removed := Narrow([]netip.Prefix{p}, nets)
		if len(removed) == 0 {
			out = append(out, e)
			continue
		}
		changed = true
		for _, q := range parts {
			out = append(out, q.String())
		}
	}
	return out, changed
}
