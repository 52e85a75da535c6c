package manifest

import (
	"fmt"
	"path"
	"strings"

	"github.com/gordon-deploy/docker-gordon/core"
)

// mount validates one volume or bind mount; kind is "volume" or "bind".
func (v *validator) mount(k, kind string, m rawMount, mounts map[string]string) core.BindMount {
	var out core.BindMount
	what := "volume name"
	if kind == "bind" {
		what = "bind name (the key of an operator-approved path in the bind policy)"
	}
	switch {
	case m.Name == nil:
		v.addf(k+".name", "required: the %s", what)
	case !dockerNameRE.MatchString(*m.Name):
		v.addf(k+".name", "invalid %s %q: %s", kind+" name", *m.Name, dockerNameRule)
	default:
		out.Name = *m.Name
	}
	if m.Path == nil {
		v.add(k+".path", `required: the absolute path inside the container, e.g. "/var/lib/data"`)
	} else if msg := checkMountPath(*m.Path); msg != "" {
		v.add(k+".path", msg)
	} else {
		out.Path = *m.Path
		if prev, dup := mounts[out.Path]; dup {
			v.addf(k+".path", "path %q is already mounted by %s: each container path takes one mount", out.Path, prev)
		} else {
			mounts[out.Path] = k
		}
	}
	if m.ReadOnly != nil {
		out.ReadOnly = *m.ReadOnly
	}
	return out
}

// checkMountPath returns "" for an absolute, clean, unreserved container
// path, else a message.
func checkMountPath(p string) string {
	if !path.IsAbs(p) {
		return fmt.Sprintf(`path %q must be absolute, e.g. "/var/lib/data"`, p)
	}
	if c := path.Clean(p); c != p {
		return fmt.Sprintf("path %q is not clean: want %q", p, c)
	}
	if p == "/" {
		return fmt.Sprintf("path %q is reserved: %s", p, mountPathRule)
	}
	for _, r := range []string{"/proc", "/sys", "/dev", "/run/secrets"} {
		if p == r || strings.HasPrefix(p, r+"/") {
			return fmt.Sprintf("path %q is reserved: %s", p, mountPathRule)
		}
	}
	return ""
}

// devices validates host device paths: absolute, clean, under /dev.
func (v *validator) devices(svcKey string, raw []string) []string {
	var out []string
	seen := map[string]string{}
	for i, d := range raw {
		k := fmt.Sprintf("%s.devices[%d]", svcKey, i)
		switch {
		case !strings.HasPrefix(d, "/dev/") || path.Clean(d) != d:
			v.addf(k, `invalid device %q: want a clean absolute path under /dev, e.g. "/dev/ttyUSB0"`, d)
		case seen[d] != "":
			v.addf(k, "device %q is already listed at %s", d, seen[d])
		default:
			seen[d] = k
			out = append(out, d)
		}
	}
	return out
}

// tmpfs validates tmpfs = ["/run", "/tmp:size=64m"]: absolute clean paths,
// Docker's tmpfs options, no path also taken by a volume or bind.
func (v *validator) tmpfs(svcKey string, raw []string, svc *core.ServiceSpec) []core.TmpfsMount {
	var out []core.TmpfsMount
	seen := map[string]string{}
	for _, m := range svc.Volumes {
		seen[m.Path] = "a volume"
	}
	for _, m := range svc.Binds {
		seen[m.Path] = "a bind"
	}
	for i, e := range raw {
		k := fmt.Sprintf("%s.tmpfs[%d]", svcKey, i)
		p, opts, _ := strings.Cut(e, ":")
		if msg := checkMountPath(p); msg != "" {
			v.addf(k, `invalid tmpfs %q: %s; want "path" or "path:options", e.g. "/tmp:size=64m,mode=1777"`, e, msg)
			continue
		}
		bad := ""
		if opts != "" || strings.Contains(e, ":") {
			for _, o := range strings.Split(opts, ",") {
				if !tmpfsOptRE.MatchString(o) {
					bad = o
					break
				}
			}
		}
		if bad != "" || (strings.Contains(e, ":") && opts == "") {
			v.addf(k, `invalid tmpfs option %q in %q: want comma-separated options such as size=64m, mode=1777, uid=1000, gid=1000, noexec, nosuid, nodev, ro`, bad, e)
			continue
		}
		if prev, dup := seen[p]; dup {
			v.addf(k, "path %q is already mounted by %s: each container path takes one mount", p, prev)
			continue
		}
		seen[p] = k
		out = append(out, core.TmpfsMount{Path: p, Options: opts})
	}
	return out
}
