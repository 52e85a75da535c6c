package policy

import (
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gordon-deploy/docker-gordon/core/access"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

// DefaultMaintenanceMessage is the message of a maintenance answer when
// the route's record has none (SPEC R75).
const DefaultMaintenanceMessage = "This site is down for maintenance. Please try again shortly."

// maintenanceRetryAfter is the Retry-After of a maintenance answer, in
// seconds (SPEC R75).
const maintenanceRetryAfter = "30"

// Maintenance is a route's maintenance mode (SPEC R75), built once per
// snapshot by NewMaintenance: a client outside allow (Exempts) gets 503
// with the page (html) or, when its Accept prefers application/json, the
// document (json) (Write). A route in maintenance is always served by the
// edge's ServeHTTP (the event loop, the HTTP/1.1 loop and the HTTP/2 fast
// path hand its requests there, as for access rules).
type Maintenance struct {
	allow []netip.Prefix
	html  []byte
	json  []byte
}

// NewMaintenance builds the maintenance of a route ValidateMaintenance
// accepted; nil when the route is not in maintenance. The message is
// hr.Maintenance.Message, DefaultMaintenanceMessage when empty.
func NewMaintenance(hr routetable.HTTPRoute) *Maintenance {
	m := hr.Maintenance
	if m == nil {
		return nil
	}
	rm := &Maintenance{}
	for _, e := range m.Allow {
		if p, err := access.ParseAllow(e); err == nil {
			rm.allow = append(rm.allow, p)
		}
	}
	msg := m.Message
	if msg == "" {
		msg = DefaultMaintenanceMessage
	}
	rm.html = []byte("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Down for maintenance</title></head>\n" +
		"<body><h1>Down for maintenance</h1>\n<p>" + strings.ReplaceAll(html.EscapeString(msg), "\n", "<br>\n") + "</p></body></html>\n")
	doc, _ := json.Marshal(struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}{"maintenance", msg})
	rm.json = append(doc, '\n')
	return rm
}

// ValidateMaintenance checks a route's maintenance record (SPEC R75): a
// UTF-8 message of at most access.MaxMaintenanceMessage bytes, allow
// entries as access.ParseAllow takes them. An error names the route and
// the entry ("route table: http host ..."); the edge wraps it with its
// ErrInvalidTable.
func ValidateMaintenance(r *routetable.HTTPRoute) error {
	m := r.Maintenance
	if m == nil {
		return nil
	}
	if len(m.Message) > access.MaxMaintenanceMessage || !utf8.ValidString(m.Message) {
		return fmt.Errorf("route table: http host %q (app %q, service %q): maintenance message must be UTF-8 of at most %d bytes",
			r.Host, r.App, r.Service, access.MaxMaintenanceMessage)
	}
	for i, e := range m.Allow {
		if _, err := access.ParseAllow(e); err != nil {
			return fmt.Errorf("route table: http host %q (app %q, service %q): maintenance allow entry %d: %v", r.Host, r.App, r.Service, i, err)
		}
	}
	return nil
}

// Exempts reports whether r's client may pass m: the maintenance allow
// list is not empty and holds the client address (clientAddr: the peer,
// or after the trusted proxies the X-Forwarded-For hop that is not one).
// A request not exempted gets Write.
func (m *Maintenance) Exempts(r *http.Request, trusted []netip.Prefix) bool {
	return len(m.allow) > 0 && prefixesContain(m.allow, clientAddr(r.RemoteAddr, r.Header.Values("X-Forwarded-For"), trusted))
}

// Write answers r with m's maintenance page (SPEC R75): 503 with
// Retry-After: 30 (seconds), Cache-Control: no-store and Vary: Accept; the
// HTML page, or the JSON document {"error":"maintenance","message":...}
// when Accept prefers application/json over text/html; no body to HEAD.
func (m *Maintenance) Write(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	body, ctype := m.html, "text/html; charset=utf-8"
	if prefersJSON(r.Header.Values("Accept")) {
		body, ctype = m.json, "application/json"
	}
	h.Set("Content-Type", ctype)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Retry-After", maintenanceRetryAfter)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Vary", "Accept")
	w.WriteHeader(http.StatusServiceUnavailable)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// prefersJSON reports whether Accept values give application/json a
// higher quality than text/html (RFC 9110 §12.5.1: the most specific
// range that matches decides each type's quality; no Accept: HTML).
func prefersJSON(accept []string) bool {
	jsonQ, htmlQ := acceptQuality(accept, "application", "json"), acceptQuality(accept, "text", "html")
	return jsonQ > 0 && jsonQ > htmlQ
}

// acceptQuality is the quality (0..1000) Accept gives typ/sub: that of its
// most specific matching range (exact, then typ/*, then */*); 0 when none
// matches or there is no Accept.
func acceptQuality(accept []string, typ, sub string) int {
	best, bestSpec := 0, -1
	for _, v := range accept {
		for _, rng := range strings.Split(v, ",") {
			mt, params, _ := strings.Cut(rng, ";")
			t, st, ok := strings.Cut(strings.ToLower(strings.TrimSpace(mt)), "/")
			if !ok {
				continue
			}
			spec := -1
			switch {
			case t == typ && st == sub:
				spec = 2
			case t == typ && st == "*":
				spec = 1
			case t == "*" && st == "*":
				spec = 0
			}
			if spec < bestSpec || spec < 0 {
				continue
			}
			q := acceptQ(params)
			if spec > bestSpec || q > best {
				best, bestSpec = q, spec
			}
		}
	}
	return best
}

// acceptQ is the q parameter of a media range's parameters in thousandths
// (1000 when absent or unparsable).
func acceptQ(params string) int {
	for _, p := range strings.Split(params, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "q") {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || f < 0 || f > 1 {
			return 1000
		}
		return int(f*1000 + 0.5)
	}
	return 1000
}
