package dashboard

import (
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/gordon-deploy/docker-gordon/core"
)

// DefaultAddr is where the dashboard listens unless told: loopback only.
const DefaultAddr = "127.0.0.1:9190"

// CheckAddr refuses, before anything listens, a listen address that is
// not loopback when no token is required: anyone who can reach such an
// address would read every app's state. "localhost" and loopback IPs are
// loopback; an empty host (":9190") is every interface.
func CheckAddr(addr string, haveToken bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--addr %q: want HOST:PORT (for example %s): %w", addr, DefaultAddr, core.ErrInvalid)
	}
	if haveToken || host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--addr %s is not a loopback address, so anyone who reaches it would see every app: give --token-file FILE (the token every request must carry), or listen on %s; nothing was started: %w", addr, DefaultAddr, core.ErrInvalid)
}

// ReadToken reads the token of --token-file: the file's first line,
// trimmed, at least 16 characters.
func ReadToken(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	tok, _, _ := strings.Cut(string(data), "\n")
	tok = strings.TrimSpace(tok)
	if len(tok) < 16 {
		return "", fmt.Errorf("--token-file %s: the token must be one line of at least 16 characters (for example: openssl rand -hex 16 > %s): %w", path, path, core.ErrInvalid)
	}
	return tok, nil
}

// tokenCookie carries the token once a browser gave it in ?token=.
const tokenCookie = "gordon_dashboard"

// requireToken answers 401 to a request without token: in
// "Authorization: Bearer", in the cookie, or in ?token= (then the cookie
// is set and the browser is sent to the same page without the token in
// its address).
func requireToken(token string, next http.Handler) http.Handler {
	ok := func(got string) bool { return subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1 }
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if bearer, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); found && ok(bearer) {
			next.ServeHTTP(w, r)
			return
		}
		if c, err := r.Cookie(tokenCookie); err == nil && ok(c.Value) {
			next.ServeHTTP(w, r)
			return
		}
		if q := r.URL.Query(); q.Has("token") && ok(q.Get("token")) {
			http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			q.Del("token")
			u := url.URL{Path: r.URL.Path, RawQuery: q.Encode()}
			http.Redirect(w, r, u.String(), http.StatusSeeOther)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="docker gordon dashboard"`)
		http.Error(w, "401: this dashboard needs its token: open it with ?token=TOKEN once, or send Authorization: Bearer TOKEN", http.StatusUnauthorized)
	})
}

// loopbackHostOnly answers 403 to a request whose Host header does not
// name a loopback address ("localhost", 127.0.0.0/8, ::1, with or without
// a port). A dashboard without a token listens on loopback only; this
// keeps a web page the user visits from reading it through a DNS name
// that it points at 127.0.0.1 (DNS rebinding).
func loopbackHostOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loopbackHost(r.Host) {
			http.Error(w, "403: this dashboard answers only to a loopback address (127.0.0.1, localhost or [::1]); to reach it by another name, start it with --token-file", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// loopbackHost reports whether a Host header value names loopback.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
