package edgeproxy

import (
	"fmt"
	"net/http"
	"net/netip"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/dataplane"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/policy"
)

// The edge's side of the per-request policy (internal/policy): it answers
// the refusals the policy decides and wraps its table errors.

// DefaultMaintenanceMessage is the message of a maintenance answer when
// the route's record has none (SPEC R75).
const DefaultMaintenanceMessage = policy.DefaultMaintenanceMessage

// ParseTrustedProxies parses a comma-separated list of CIDRs or bare IPs
// ("10.0.0.0/8,192.168.1.7") into prefixes for Config.TrustedProxies.
// Errors name the bad entry (policy.ParseTrustedProxies).
func ParseTrustedProxies(list string) ([]netip.Prefix, error) {
	return policy.ParseTrustedProxies(list)
}

// validateRoutePolicy checks a route's access and maintenance records
// (policy.ValidateAccess, ValidateMaintenance); errors wrap
// ErrInvalidTable.
func validateRoutePolicy(r *routetable.HTTPRoute) error {
	err := policy.ValidateAccess(r)
	if err == nil {
		err = policy.ValidateMaintenance(r)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", err, ErrInvalidTable)
	}
	return nil
}

// admit applies rt's guard to r (SPEC R73, policy.Guard.Check) and reports
// whether the request goes on. A client outside allow gets 403; then,
// with basic auth, a request without valid credentials gets 401 with
// WWW-Authenticate, and one arriving while every password check slot
// stays busy gets 429 with Retry-After. ServeHTTP removes the
// Authorization header of an admitted request on a route with basic auth
// (the backend never sees the password). Credentials are never logged or
// echoed.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, rt *dataplane.HTTPRoute) bool {
	switch status, ip := rt.Guard.Check(r, s.cfg.TrustedProxies, s.auth); status {
	case 0:
		return true
	case http.StatusForbidden:
		who := "your address"
		if ip.IsValid() {
			who += " " + ip.String()
		}
		dataplane.WriteEdgeError(w, http.StatusForbidden, "gordon-edge: 403 Forbidden: "+who+" is not allowed on "+dataplane.StripPort(r.Host)+"\n")
	case http.StatusTooManyRequests:
		w.Header().Set("Retry-After", "1")
		dataplane.WriteEdgeError(w, http.StatusTooManyRequests, "gordon-edge: 429 Too Many Requests: too many password checks at once; retry in a second\n")
	default:
		w.Header().Set("WWW-Authenticate", rt.Guard.Challenge())
		dataplane.WriteEdgeError(w, http.StatusUnauthorized, "gordon-edge: 401 Unauthorized: "+dataplane.StripPort(r.Host)+" needs a valid user name and password\n")
	}
	return false
}

// answerMaintenance answers r with rt's maintenance page (SPEC R75,
// policy.Maintenance.Write) unless the client address (after trusted
// proxies) is in the maintenance allow list; it reports whether it
// answered.
func (s *Server) answerMaintenance(w http.ResponseWriter, r *http.Request, rt *dataplane.HTTPRoute) bool {
	if rt.Maint.Exempts(r, s.cfg.TrustedProxies) {
		return false
	}
	noteRoute(w, rt)
	rt.Maint.Write(w, r)
	return true
}
