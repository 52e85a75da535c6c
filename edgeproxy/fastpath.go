package edgeproxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
)

// hopHeaders are removed in both directions (RFC 9110 §7.6.1), as
// httputil.ReverseProxy does, plus every header a Connection header names.
var hopHeaders = map[string]bool{
	"Connection":          true,
	"Proxy-Connection":    true,
	"Keep-Alive":          true,
	"Proxy-Authenticate":  true,
	"Proxy-Authorization": true,
	"Te":                  true,
	"Trailer":             true,
	"Transfer-Encoding":   true,
	"Upgrade":             true,
}

// forwardedHeaders are replaced by the edge (forwardedFor).
var forwardedHeaders = map[string]bool{
	"Forwarded":         true,
	"X-Forwarded-For":   true,
	"X-Forwarded-Host":  true,
	"X-Forwarded-Proto": true,
}

// connectionTokens reports whether h's Connection header names key.
func connectionNames(h http.Header, key string) bool {
	for _, v := range h["Connection"] {
		for tok := range strings.SplitSeq(v, ",") {
			if http.CanonicalHeaderKey(strings.TrimSpace(tok)) == key {
				return true
			}
		}
	}
	return false
}

// serveFast proxies an eligible request (fastEligible: GET or HEAD, no
// body, no upgrade) without httputil.ReverseProxy: the request is written
// straight from the incoming one onto a pooled backend connection (hop-by-
// hop headers dropped, forwarded headers and X-Request-ID set as
// setForwarded does), and the response is copied to w, flushed after every
// read when its length is unknown or it is an event stream (SSE), else
// written through. Errors before the response answer 502/503/504 pages
// (proxyError); a backend failing mid-body aborts the client connection
// (http.ErrAbortHandler) so a truncated body is never passed off as
// complete, as ReverseProxy does.
func (s *Server) serveFast(w *statusWriter, r *http.Request, rt *httpRoute, i int) {
	b := rt.backends[i]
	trusted := s.reg.trusted
	write := func(wr io.Writer) error { return writeOutgoing(wr.(*bufio.Writer), r, trusted) }
	resp, err := b.transport.roundTripWith(r, rt.timeouts, write)
	if err != nil {
		s.reg.proxyError(w, r, b.addr, err)
		return
	}
	defer resp.Body.Close()
	h := w.Header()
	for k, vv := range resp.Header {
		if hopHeaders[k] || connectionNames(resp.Header, k) {
			continue
		}
		h[k] = vv
	}
	w.WriteHeader(resp.StatusCode)
	if resp.Body == http.NoBody {
		return
	}
	flush := resp.ContentLength < 0 || strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
	buf := s.reg.bufferPool.Get()
	defer s.reg.bufferPool.Put(buf)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return // the client went away; Close drops the backend conn
			}
			if flush {
				w.Flush()
			}
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			if r.Context().Err() == nil {
				s.logger.Debug("backend failed mid-response", "backend", b.addr, "host", r.Host, "error", rerr)
			}
			panic(http.ErrAbortHandler)
		}
	}
	for k, vv := range resp.Trailer {
		h[http.TrailerPrefix+k] = vv
	}
}

// writeOutgoing writes the request line and headers of the proxied form of
// r on bw (no body: only bodiless requests take the fast path).
func writeOutgoing(bw *bufio.Writer, r *http.Request, trusted []netip.Prefix) error {
	uri := r.RequestURI
	if uri == "" || uri[0] != '/' {
		uri = r.URL.RequestURI()
	}
	bw.WriteString(r.Method)
	bw.WriteByte(' ')
	bw.WriteString(uri)
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(r.Host)
	bw.WriteString("\r\n")
	for k, vv := range r.Header {
		if hopHeaders[k] || forwardedHeaders[k] || connectionNames(r.Header, k) {
			if k == "Te" && headerHasToken(vv, "trailers") {
				bw.WriteString("Te: trailers\r\n")
			}
			continue
		}
		for _, v := range vv {
			bw.WriteString(k)
			bw.WriteString(": ")
			bw.WriteString(v)
			bw.WriteString("\r\n")
		}
	}
	f := forwardedFor(r, trusted)
	if f.xff != "" {
		writeHeader(bw, "X-Forwarded-For", f.xff)
	}
	writeHeader(bw, "Forwarded", f.fwd)
	writeHeader(bw, "X-Forwarded-Proto", f.proto)
	writeHeader(bw, "X-Forwarded-Host", f.host)
	if f.requestID != "" {
		writeHeader(bw, "X-Request-Id", f.requestID)
	}
	_, err := bw.WriteString("\r\n")
	return err
}

func writeHeader(bw *bufio.Writer, k, v string) {
	bw.WriteString(k)
	bw.WriteString(": ")
	bw.WriteString(v)
	bw.WriteString("\r\n")
}

func headerHasToken(vv []string, token string) bool {
	for _, v := range vv {
		for tok := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), token) {
				return true
			}
		}
	}
	return false
}

// proxyError answers the error page for a failed backend exchange (or
// nothing when the client went away) and marks it for the metrics.
func (r *registry) proxyError(w http.ResponseWriter, req *http.Request, addr string, err error) {
	code, what := classifyProxyError(req.Context(), err)
	if code == 0 {
		return // the client went away; nobody reads an answer
	}
	if sw, ok := w.(*statusWriter); ok {
		sw.proxyErr = code
	}
	r.logger.Debug("proxy error", "backend", addr, "host", req.Host, "status", code, "error", err)
	writeEdgeError(w, code, fmt.Sprintf("gordon-edge: %d %s: %s (backend %s)\n", code, http.StatusText(code), what, addr))
}
