package routetable

import (
	"strconv"
	"strings"
)

// ValidHSTS reports whether v is a Strict-Transport-Security value of
// RFC 6797 §6.1 as the edge sends it: "max-age=SECONDS", then optionally
// "includeSubDomains" and "preload", separated by ";".
func ValidHSTS(v string) bool {
	maxAge := false
	for i, d := range strings.Split(v, ";") {
		d = strings.TrimSpace(d)
		switch {
		case i == 0 && strings.HasPrefix(strings.ToLower(d), "max-age="):
			n := d[len("max-age="):]
			if _, err := strconv.ParseUint(n, 10, 32); err != nil {
				return false
			}
			maxAge = true
		case i > 0 && (strings.EqualFold(d, "includeSubDomains") || strings.EqualFold(d, "preload")):
		default:
			return false
		}
	}
	return maxAge
}
