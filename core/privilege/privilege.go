// Package privilege decides which container options go beyond Docker's
// defaults and so need the operator's approval ([privileges.<app>] of
// <state>/config.toml, docs/security.md).
package privilege

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gordon-deploy/docker-gordon/core"
)

// DefaultCapabilities is Docker's default capability set (without "CAP_"):
// asking for one of them in cap_add changes nothing and needs no approval.
var DefaultCapabilities = []string{
	"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
	"NET_BIND_SERVICE", "NET_RAW", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
}

// Privileges are the options beyond Docker's defaults that the operator
// approved for one app: [privileges.<app>] of <state>/config.toml, e.g.
//
//	[privileges.shop]
//	cap_add = ["NET_ADMIN"]
//	devices = ["/dev/fuse"]
//
// CapAdd names capabilities as a manifest does (with or without "CAP_",
// any case; "ALL" approves every capability); Devices are host device
// paths.
type Privileges struct {
	CapAdd  []string `toml:"cap_add" json:"cap_add,omitempty"`
	Devices []string `toml:"devices" json:"devices,omitempty"`
}

// capName is a capability name without "CAP_", upper case.
func capName(c string) string { return strings.TrimPrefix(strings.ToUpper(c), "CAP_") }

// Unapproved returns what svc asks beyond Docker's defaults that p does not
// approve, in the manifest's order: capabilities of cap_add outside
// DefaultCapabilities (normalized, "ALL" included), and every device.
func (p Privileges) Unapproved(svc *core.ServiceSpec) (caps, devices []string) {
	approved := map[string]bool{}
	for _, c := range p.CapAdd {
		approved[capName(c)] = true
	}
	for _, c := range svc.Container.CapAdd {
		n := capName(c)
		if !slices.Contains(DefaultCapabilities, n) && !approved[n] && !approved["ALL"] {
			caps = append(caps, n)
		}
	}
	for _, d := range svc.Devices {
		if !slices.Contains(p.Devices, d) {
			devices = append(devices, d)
		}
	}
	return caps, devices
}

// Refusal is the refusal of svc's unapproved options (nil when
// p approves all it asks): it names what the service asks and the lines
// the operator sets under [privileges.<app>] in configPath (what p already
// approves plus what is missing), e.g.
//
//	capability SYS_ADMIN needs the operator's approval: set
//	cap_add = ["SYS_ADMIN"] under [privileges.shop] in
//	/var/lib/docker-gordon/config.toml
//
// The caller names the service. The error wraps ErrInvalid.
func Refusal(app, configPath string, p Privileges, svc *core.ServiceSpec) error {
	caps, devices := p.Unapproved(svc)
	if len(caps) == 0 && len(devices) == 0 {
		return nil
	}
	var asks, sets []string
	if len(caps) > 0 {
		asks = append(asks, plural(len(caps), "capability", "capabilities")+" "+strings.Join(caps, ", "))
		sets = append(sets, "cap_add = "+tomlList(append(slices.Clone(p.CapAdd), caps...)))
	}
	if len(devices) > 0 {
		asks = append(asks, plural(len(devices), "device", "devices")+" "+strings.Join(devices, ", "))
		sets = append(sets, "devices = "+tomlList(append(slices.Clone(p.Devices), devices...)))
	}
	needs := "needs"
	if len(caps)+len(devices) > 1 {
		needs = "need"
	}
	return refusal(fmt.Sprintf("%s %s the operator's approval: set %s under [privileges.%s] in %s",
		strings.Join(asks, " and "), needs, strings.Join(sets, " and "), app, configPath))
}

// refusal is a refusal in the user's words that is ErrInvalid
// (errors.Is) without printing the class.
type refusal string

func (e refusal) Error() string        { return string(e) }
func (e refusal) Is(target error) bool { return target == core.ErrInvalid }

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// tomlList writes items as a TOML array of basic strings.
func tomlList(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
