package policy

import (
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strings"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/h1wire"
)

// ParseTrustedProxies parses a comma-separated list of CIDRs or bare IPs
// ("10.0.0.0/8,192.168.1.7"; blanks around entries and empty entries are
// skipped) into masked prefixes, a bare IP as a single-address prefix
// (IPv4-mapped IPv6 unmapped): the edge's Config.TrustedProxies. Errors
// name the bad entry ("trusted proxy %q: ...").
func ParseTrustedProxies(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for f := range strings.SplitSeq(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if strings.Contains(f, "/") {
			p, err := netip.ParsePrefix(f)
			if err != nil {
				return nil, fmt.Errorf("trusted proxy %q: %w", f, err)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q: %w", f, err)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// SetForwarded sets the forwarded headers of the outgoing request (STYLE
// "What we take" 13). ReverseProxy (Rewrite mode) has already removed
// Forwarded and X-Forwarded-* from pr.Out. When the peer is in trusted,
// the incoming chain is kept and extended: X-Forwarded-For and Forwarded
// get the peer appended, X-Forwarded-Proto/-Host are kept when present.
// Otherwise the chain is replaced by the peer alone, and the other client
// claims (h1wire.ClientClaimHeaders: X-Real-Ip, ...) are removed.
// X-Request-ID is added (32 hex characters) when the request has none.
func SetForwarded(pr *httputil.ProxyRequest, trusted []netip.Prefix) {
	f := ForwardedFor(pr.In, trusted)
	// One backing array for the five header values (one allocation).
	vals := make([]string, 5)
	h := pr.Out.Header
	if f.XFF != "" {
		vals[0] = f.XFF
		h["X-Forwarded-For"] = vals[0:1:1]
	}
	vals[1] = f.Fwd
	h["Forwarded"] = vals[1:2:2]
	vals[2] = f.Proto
	h["X-Forwarded-Proto"] = vals[2:3:3]
	vals[3] = f.Host
	h["X-Forwarded-Host"] = vals[3:4:4]
	if !f.Trusted {
		for _, k := range h1wire.ClientClaimHeaders {
			delete(h, k)
		}
	}
	// The outgoing request decides: an X-Request-ID the client named in
	// Connection was removed as hop-by-hop, and an empty one is no id.
	if h.Get("X-Request-Id") == "" {
		vals[4] = string(AppendRequestID(nil))
		h["X-Request-Id"] = vals[4:5:5]
	}
}

// Forwarded are the values of the forwarded headers for one request.
type Forwarded struct {
	// XFF is X-Forwarded-For ("": none), Fwd is Forwarded (RFC 7239),
	// Proto is X-Forwarded-Proto ("http" or "https" unless a trusted peer
	// named one) and Host is X-Forwarded-Host.
	XFF, Fwd, Proto, Host string
	// Trusted: the peer is a trusted proxy.
	Trusted bool
}

// ForwardedFor computes the forwarded header values of in, whose
// RemoteAddr is the peer ("IP:port") and TLS says the scheme, with the
// trusted proxies trusted (rules at SetForwarded).
func ForwardedFor(in *http.Request, trusted []netip.Prefix) Forwarded {
	peer := in.RemoteAddr
	if i := strings.LastIndexByte(peer, ':'); i >= 0 {
		peer = peer[:i]
	}
	peer = strings.TrimSuffix(strings.TrimPrefix(peer, "["), "]")
	ip, _ := netip.ParseAddr(peer)
	ok := false
	if len(trusted) > 0 && ip.IsValid() {
		ip = ip.Unmap()
		for _, p := range trusted {
			if p.Contains(ip) {
				ok = true
				break
			}
		}
	}
	f := Forwarded{XFF: peer, Proto: "http", Host: in.Host, Trusted: ok}
	if in.TLS != nil {
		f.Proto = "https"
	}
	if ok {
		if prior := in.Header.Values("X-Forwarded-For"); len(prior) > 0 {
			f.XFF = strings.Join(prior, ", ") + ", " + peer
		}
		if v := in.Header.Get("X-Forwarded-Proto"); v != "" {
			f.Proto = v
		}
		if v := in.Header.Get("X-Forwarded-Host"); v != "" {
			f.Host = v
		}
		f.Fwd = ForwardedElement(ip, peer, in.Host, f.Proto)
		if prior := in.Header.Values("Forwarded"); len(prior) > 0 {
			f.Fwd = strings.Join(prior, ", ") + ", " + f.Fwd
		}
	} else {
		f.Fwd = ForwardedElement(ip, peer, in.Host, f.Proto)
	}
	return f
}

// ForwardedElement renders one RFC 7239 element,
// `for=PEER;host="HOST";proto=PROTO`: for is peer as written (ip says
// whether it is IPv6: then bracketed and quoted; omitted when peer is
// empty), host is quoted with backslash and quote escaped.
func ForwardedElement(ip netip.Addr, peer, host, proto string) string {
	var b strings.Builder
	b.Grow(len(peer) + len(host) + 32)
	if peer != "" {
		b.WriteString("for=")
		if ip.Is6() {
			b.WriteString(`"[`)
			b.WriteString(peer)
			b.WriteString(`]"`)
		} else {
			b.WriteString(peer)
		}
		b.WriteByte(';')
	}
	b.WriteString(`host="`)
	b.WriteString(strings.ReplaceAll(strings.ReplaceAll(host, `\`, `\\`), `"`, `\"`))
	b.WriteString(`";proto=`)
	b.WriteString(proto)
	return b.String()
}

// AppendRequestID appends a request id to dst: 32 random lowercase hex
// characters (16 bytes; not cryptographic: an id for correlating logs, not
// a secret). It allocates only when dst lacks room.
func AppendRequestID(dst []byte) []byte {
	var raw [16]byte
	a, c := rand.Uint64(), rand.Uint64()
	for i := range 8 {
		raw[i] = byte(a >> (8 * i))
		raw[8+i] = byte(c >> (8 * i))
	}
	return hex.AppendEncode(dst, raw[:])
}
