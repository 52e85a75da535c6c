package dataplane

import (
	"io"
	"net/http"
	"net/netip"
	"time"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/accesslog"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/h1wire"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/internal/policy"
)

type accessLog struct{ *accesslog.Log }

func NewAccessLog(out io.Writer, trusted []netip.Prefix) *accessLog {
	return &accessLog{accesslog.New(out, trusted)}
}

func routeNames(e *accesslog.Entry, rm *RouteMetrics, rt *HTTPRoute) {
	if rm != nil {
		e.App, e.Service, e.Instance = rm.app, rm.service, rm.instance
	} else if rt != nil {
		e.App, e.Service = rt.App, rt.Service
	}
}

func (a *accessLog) LogServeHTTP(r *http.Request, rm *RouteMetrics, rt *HTTPRoute, status int, bytesOut int64, start time.Time, requestID string) {
	e := accesslog.Entry{Status: status, Start: start, BytesOut: bytesOut, RequestIDS: requestID}
	routeNames(&e, rm, rt)
	a.WriteRequest(r, &e)
}

type ExchangeAccess struct {
	hc                      *H1Conn
	H2                      bool   // an HTTP/2 stream (fast path)
	H2Peer                  string // its connection's client address
	Method, Path, Authority string
	BytesOut                int64
	GenID                   h1wire.RequestIDBuf
}

func (hc *H1Conn) markBody() {
	hc.bodyMark = hc.sent + int64(hc.bw.Buffered())
}

func (a *accessLog) logExchange(ex *Exchange, rm *RouteMetrics, code int) {
	acc := &ex.Acc
	e := accesslog.Entry{Status: code, Start: ex.Start, BytesOut: acc.BytesOut}
	routeNames(&e, rm, nil)
	switch {
	case acc.hc != nil:
		hc := acc.hc
		req := &hc.Req
		e.Host, e.Method, e.Path, e.Protocol = req.Host, req.Method, req.URI, "HTTP/1.1"
		e.Client = hc.Peer
		var xff []byte
		for _, h := range req.Headers {
			switch h.Kind {
			case h1wire.HdrRequestID:
				if req.RequestID && len(h.Value) > 0 {
					e.RequestID = h.Value
				}
			case h1wire.HdrForwarded:
				if hc.Trusted && h1wire.ASCIIEqualFold(h.Name, "x-forwarded-for") {
					if len(xff) > 0 {
						xff = append(xff, ',')
					}
					xff = append(xff, h.Value...)
				}
			}
		}
		if !req.RequestID {
			e.RequestID = req.GenID.B[:req.GenID.N]
		}
		if hc.Trusted {
			e.Client = a.ClientBehind(hc.Peer, string(xff))
		}
	case acc.H2:
		e.HostS, e.MethodS, e.PathS, e.Protocol = acc.Authority, acc.Method, acc.Path, "HTTP/2"
		e.Client = acc.H2Peer
		e.RequestID, e.RequestIDS = acc.GenID.B[:acc.GenID.N], acc.GenID.Given
		if e.RequestIDS != "" {
			e.RequestID = nil
		}
	default:
		return
	}
	a.Write(&e)
}

func (a *accessLog) EnsureRequestID(r *http.Request) string {
	if a == nil {
		return ""
	}
	if id := r.Header.Get("X-Request-Id"); id != "" {
		return id
	}
	id := string(policy.AppendRequestID(nil))
	if r.Header == nil {
		r.Header = http.Header{}
	}
	r.Header.Set("X-Request-Id", id)
	return id
}
