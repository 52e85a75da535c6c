package h2srv

import (
	"net/http"
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
)

// Checks of an HTTP/2 request's header block (RFC 9113 §8), shared by
// both paths.

// h2Malformed reports whether f is a malformed request (RFC 9113 §8.1.1)
// by the rules the framer leaves to the server: a field value with
// leading or trailing whitespace (§8.2.1); more than one host field, or
// one that differs from :authority (§8.3.1); :protocol, as extended
// CONNECT is not offered (RFC 8441 §4); a :scheme other than http or
// https; a :path with a fragment.
func h2Malformed(f *http2.MetaHeadersFrame) bool {
	hosts, host := 0, ""
	for _, hf := range f.Fields {
		if v := hf.Value; v != "" && (isFieldSpace(v[0]) || isFieldSpace(v[len(v)-1])) {
			return true
		}
		if hf.Name == "host" {
			hosts++
			host = hf.Value
		}
	}
	auth := f.PseudoValue("authority")
	if hosts > 1 || hosts == 1 && auth != "" && !strings.EqualFold(auth, host) {
		return true
	}
	if f.PseudoValue("protocol") != "" || strings.IndexByte(f.PseudoValue("path"), '#') >= 0 {
		return true
	}
	scheme := f.PseudoValue("scheme")
	return f.PseudoValue("method") != http.MethodConnect && scheme != "https" && scheme != "http"
}

func isFieldSpace(b byte) bool { return b == ' ' || b == '\t' }

// headerListSize is the size of f's header list (RFC 9113 §6.5.2: each
// field's name and value lengths plus 32).
func headerListSize(f *http2.MetaHeadersFrame) int64 {
	var n int64
	for _, hf := range f.Fields {
		n += int64(hf.Size())
	}
	return n
}

// validMethod accepts a :method that is a token (RFC 9110 §9.1).
func validMethod(m string) bool {
	for i := 0; i < len(m); i++ {
		if !httpguts.IsTokenRune(rune(m[i])) {
			return false
		}
	}
	return m != ""
}

// validRequestPath accepts a :path of RFC 9113 §8.3.1 that an HTTP/1.1
// request line can carry (the backend request is HTTP/1.1): an absolute
// path (and query), or "*" for OPTIONS; no space or control byte.
func validRequestPath(method, p string) bool {
	if p == "*" {
		return method == http.MethodOptions
	}
	return validOriginPath(p)
}
