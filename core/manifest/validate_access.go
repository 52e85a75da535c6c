package manifest

import (
	"fmt"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/access"
)

// httpAccess validates an interface's basic_auth and allow lists (rule
// R73): both need a public interface; basic_auth entries are htpasswd
// bcrypt lines "user:$2y$..." with distinct users (plain text, MD5, SHA
// refused, access.ParseBasicAuth); allow entries are CIDRs or IPs
// (access.ParseAllow). An empty list is refused (it would lock everyone
// out or mean nothing). Problems never repeat an entry's password part.
func (v *validator) httpAccess(k string, h rawHTTP, out *core.HTTPInterface) {
	if h.BasicAuth != nil {
		v.basicAuth(k+".basic_auth", *h.BasicAuth, out)
	}
	if h.Allow == nil {
		return
	}
	key := k + ".allow"
	switch {
	case out.Visibility == core.VisibilityInternal:
		v.add(key, `allow applies to a public interface: set host, or remove allow`)
		return
	case len(*h.Allow) == 0:
		v.add(key, `allow is empty: list the client CIDRs or IPs let in, e.g. ["10.0.0.0/8"], or remove allow`)
		return
	}
	list := make([]string, 0, len(*h.Allow))
	for i, e := range *h.Allow {
		p, err := access.ParseAllow(e)
		if err != nil {
			v.addf(fmt.Sprintf("%s[%d]", key, i), "invalid allow entry: %v", err)
			continue
		}
		list = append(list, p.String())
	}
	out.Allow = list
}

// basicAuth validates the basic_auth list at key (httpAccess).
func (v *validator) basicAuth(key string, entries []string, out *core.HTTPInterface) {
	switch {
	case out.Visibility == core.VisibilityInternal:
		v.add(key, `basic_auth applies to a public interface: set host, or remove basic_auth`)
		return
	case len(entries) == 0:
		v.add(key, `basic_auth is empty: list htpasswd bcrypt lines ("user:$2y$..."; `+access.HtpasswdHint+`), or remove basic_auth`)
		return
	}
	users := map[string]int{}
	for i, e := range entries {
		ek := fmt.Sprintf("%s[%d]", key, i)
		user, _, err := access.ParseBasicAuth(e)
		if err != nil {
			v.addf(ek, "invalid basic_auth entry: %v", err)
			continue
		}
		if prev, dup := users[user]; dup {
			v.addf(ek, "user %q is already listed at %s[%d]: one line per user", user, key, prev)
			continue
		}
		users[user] = i
	}
	out.BasicAuth = append([]string(nil), entries...)
}
