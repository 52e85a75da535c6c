package compose

import (
	"maps"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"

	accessrule "github.com/gordon-deploy/docker-gordon/core/access"
)

// access is what a router's Traefik middlewares map to on its HTTP
// interfaces (SPEC R73): basic_auth lines and allow CIDRs.
type access struct {
	basicAuth []string
	allow     []string
}

// middleware labels the edge honours, after "traefik.http.middlewares.NAME.".
const (
	mwBasicAuthUsers   = "basicauth.users"
	mwBasicAuthRealm   = "basicauth.realm"
	mwBasicAuthRemove  = "basicauth.removeheader"
	mwAllowSourceRange = "ipallowlist.sourcerange"
	mwWhiteSourceRange = "ipwhitelist.sourcerange" // Traefik v2 name
)

// routerAccess maps the comma-separated middlewares list of one router
// (the label value mw) onto access rules. Each middleware ("NAME" or
// "NAME@docker") must be defined by labels of a service of the project
// (this service first): basicauth.users (htpasswd bcrypt lines;
// basicauth.realm and removeheader are accepted, the edge's realm is the
// host and it always removes Authorization) and
// ipallowlist.sourcerange / ipwhitelist.sourcerange (CIDRs). Any other
// middleware, option or provider is refused, as are two basic-auth or two
// allowlist middlewares on one router. ok is false when something was
// refused (through refuse, with the message).
func (m *mapper) routerAccess(name, mw string, refuse func(string, ...any)) (a access, ok bool) {
	ok = true
	for ref := range strings.SplitSeq(mw, ",") {
		ref = strings.TrimSpace(ref)
		if ref == "" {
			continue
		}
		mwName, provider, _ := strings.Cut(ref, "@")
		if provider != "" && provider != "docker" {
			refuse("Traefik middleware %s is defined by the %s provider, which gordon does not read: define it with labels (traefik.http.middlewares.%s.basicauth.users or .ipallowlist.sourcerange), or keep Traefik in front", ref, provider, mwName)
			ok = false
			continue
		}
		opts := m.middlewareLabels(name, mwName)
		if len(opts) == 0 {
			refuse("Traefik middleware %s is not defined by any service's labels: define it with traefik.http.middlewares.%s.basicauth.users or .ipallowlist.sourcerange, or remove it from the router", ref, mwName)
			ok = false
			continue
		}
		if !m.applyMiddleware(mwName, opts, &a, refuse) {
			ok = false
		}
	}
	return a, ok
}

// applyMiddleware adds one middleware's options (label suffix → value) to a.
func (m *mapper) applyMiddleware(mwName string, opts map[string]string, a *access, refuse func(string, ...any)) bool {
	ok := true
	for _, opt := range slices.Sorted(maps.Keys(opts)) {
		v := opts[opt]
		switch strings.ToLower(opt) {
		case mwBasicAuthUsers:
			if a.basicAuth != nil {
				refuse("Traefik middleware %s: the router has two basic-auth middlewares; merge their users into one", mwName)
				ok = false
				continue
			}
			a.basicAuth = []string{}
			for i, e := range splitList(v) {
				if _, _, err := accessrule.ParseBasicAuth(e); err != nil {
					refuse("Traefik middleware %s: basicauth.users entry %d: %v (in a compose file, write each $ of the hash as $$)", mwName, i, err)
					ok = false
					continue
				}
				a.basicAuth = append(a.basicAuth, e)
			}
		case mwAllowSourceRange, mwWhiteSourceRange:
			if a.allow != nil {
				refuse("Traefik middleware %s: the router has two IP allowlist middlewares; merge their source ranges into one", mwName)
				ok = false
				continue
			}
			a.allow = splitList(v)
		case mwBasicAuthRealm:
			m.note("middleware %s: basicauth.realm %q is not kept: the edge's realm is the host name", mwName, v)
		case mwBasicAuthRemove:
			if !strings.EqualFold(v, "true") {
				m.note("middleware %s: the edge removes the Authorization header of authenticated requests (as removeheader=true): the service does not see the password", mwName)
			}
		default:
			refuse("Traefik middleware %s: option %s cannot be honoured: the edge maps basicauth.users and ipallowlist.sourcerange only (no headers, redirects, usersfile or ipstrategy; the client address is taken after the edge's --trusted-proxies); remove it, or keep Traefik in front", mwName, opt)
			ok = false
		}
	}
	return ok
}

// middlewareLabels are the options of middleware mwName (label suffix
// after "traefik.http.middlewares.NAME." → value) from the labels of the
// service name, else of the first other service (by name) defining it.
func (m *mapper) middlewareLabels(name, mwName string) map[string]string {
	prefix := "traefik.http.middlewares." + mwName + "."
	from := func(svc types.ServiceConfig) map[string]string {
		out := map[string]string{}
		for k, v := range svc.Labels {
			if opt, ok := strings.CutPrefix(k, prefix); ok {
				out[opt] = v
			}
		}
		return out
	}
	if svc, ok := m.p.Services[name]; ok {
		if opts := from(svc); len(opts) > 0 {
			return opts
		}
	}
	for _, other := range slices.Sorted(maps.Keys(m.p.Services)) {
		if opts := from(m.p.Services[other]); len(opts) > 0 {
			return opts
		}
	}
	return nil
}

// splitList splits a comma-separated label value, trimming entries and
// dropping empty ones.
func splitList(v string) []string {
	var out []string
	for e := range strings.SplitSeq(v, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}
