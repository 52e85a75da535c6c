// Package access parses the access rules of an HTTP interface (basic_auth
// htpasswd bcrypt lines, allow CIDRs) for the manifest, compose and the
// edge (R73). It is its own package so that plugins, which compile against
// core and core/routetable, do not compile bcrypt.
package access

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

// HtpasswdHint says how to make a valid basic_auth entry; validation
// errors end with it.
const HtpasswdHint = "make one with: htpasswd -nbB USER PASSWORD"

// MaxMaintenanceMessage is the longest maintenance message (SPEC R75),
// in bytes.
const MaxMaintenanceMessage = 4096

// MaxBcryptCost is the highest bcrypt cost a basic_auth hash may have
// (cost 14 takes about a second of CPU per check).
const MaxBcryptCost = 14

// ParseBasicAuth splits one basic_auth entry, an htpasswd line
// "user:bcrypt-hash" ("$2a$", "$2b$" or "$2y$", cost 4..MaxBcryptCost), into the user
// and the hash. The user is non-empty and has no ':' or control
// character. Any other entry is an error that names what is wrong but
// never repeats the entry (it may be a password): plain text, MD5
// ("$apr1$", "$1$"), SHA ("{SHA}") and crypt(3) entries are refused.
func ParseBasicAuth(entry string) (user, hash string, err error) {
	user, hash, ok := strings.Cut(entry, ":")
	switch {
	case !ok || hash == "":
		return "", "", errors.New("not an htpasswd line \"user:bcrypt-hash\"; " + HtpasswdHint)
	case user == "":
		return "", "", errors.New("the user name is empty; " + HtpasswdHint)
	case strings.ContainsFunc(user, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return "", "", errors.New("the user name has a control character")
	}
	switch {
	case strings.HasPrefix(hash, "$apr1$"), strings.HasPrefix(hash, "$1$"):
		return "", "", fmt.Errorf("user %q: MD5 (apr1) hashes are refused, only bcrypt; %s", user, HtpasswdHint)
	case strings.HasPrefix(hash, "{SHA}"):
		return "", "", fmt.Errorf("user %q: SHA-1 hashes are refused, only bcrypt; %s", user, HtpasswdHint)
	case !strings.HasPrefix(hash, "$2"):
		return "", "", fmt.Errorf("user %q: the password is not a bcrypt hash (plain text and crypt hashes are refused); %s", user, HtpasswdHint)
	}
	cost, cerr := bcrypt.Cost([]byte(hash))
	if cerr != nil || len(hash) != 60 {
		return "", "", fmt.Errorf("user %q: malformed bcrypt hash (want 60 characters \"$2y$COST$...\"); %s", user, HtpasswdHint)
	}
	if cost > MaxBcryptCost {
		return "", "", fmt.Errorf("user %q: bcrypt cost %d is above %d (each first check would take seconds of CPU); make one with: htpasswd -nbB -C 10 USER PASSWORD", user, cost, MaxBcryptCost)
	}
	return user, hash, nil
}

// ParseAllow parses one allow entry: a CIDR ("10.0.0.0/8",
// "2001:db8::/32") or a bare IP (a single address). The prefix is masked
// and IPv4-mapped IPv6 addresses are unmapped.
func ParseAllow(entry string) (netip.Prefix, error) {
	if strings.Contains(entry, "/") {
		p, err := netip.ParsePrefix(entry)
		if err != nil || p.Addr().Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("%q is not a CIDR (e.g. \"10.0.0.0/8\") or an IP address", entry)
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(entry)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR (e.g. \"10.0.0.0/8\") or an IP address", entry)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}
