package dataplane

import (
	"net/http"
	"strings"
)

type HostEntry struct {
	Gen   uint64
	Route *HTTPRoute
}

func (s *Core) Route(snap *Snapshot, rawHost string) *HTTPRoute {
	host := NormalizeHost(rawHost)
	if r, ok := snap.Exact[host]; ok {
		return r
	}
	if len(snap.Wildcards) == 0 || s.Hosts == nil {
		return nil
	}
	if e, ok := s.Hosts.Get(host); ok && e.Gen == snap.Generation {
		return e.Route
	}
	r := snap.MatchWildcard(host)
	s.Hosts.Set(host, HostEntry{Gen: snap.Generation, Route: r}, 1)
	return r
}

func IsUpgrade(r *http.Request) bool {
	if r.Header.Get("Upgrade") == "" {
		return false
	}
	for _, v := range r.Header["Connection"] {
		for tok := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "upgrade") {
				return true
			}
		}
	}
	return false
}
