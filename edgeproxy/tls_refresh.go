package edgeproxy

import (
	"crypto/x509"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/caddyserver/certmagic"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/certstore"
)

// refresh rebuilds the served-certificate set, the route flags, the
// expiry gauges and certs/state.json, and hands new exact hosts to
// certmagic. Run calls it after each apply and every poll tick.
func (t *tlsEdge) refresh(writeState bool) {
	t.refreshMu.Lock()
	defer t.refreshMu.Unlock()
	if t.ctx.Err() != nil {
		return // closed: nothing more is written under the state directory
	}
	t.reloadStatic()
	snap := t.s.snap.Load()
	have, infos := t.staticInfos()
	toManage, names := t.trackRoutedHosts(snap)
	infos = t.managedInfos(names, t.cachedLeaves(names), have, infos)
	t.have.Store(&have)
	if snap != nil {
		t.annotate(snap)
	}
	t.startManaging(toManage)
	if writeState {
		t.writeCertState(infos)
	}
}

// staticInfos returns the hosts static certificates serve (have) and the
// certificate state of every static certificate, loaded or refused, and
// sets the expiry gauges of the loaded ones.
func (t *tlsEdge) staticInfos() (have map[string]struct{}, infos []certstore.Info) {
	st := t.static.Load()
	have = map[string]struct{}{}
	for h, c := range st.certs {
		have[h] = struct{}{}
		infos = append(infos, certstore.Info{Host: h, Source: certstore.SourceStatic, Issuer: certstore.IssuerName(c.Leaf), NotAfter: c.Leaf.NotAfter.UTC(), State: certstore.StateValid})
		t.notAfter.WithLabelValues(h).Set(float64(c.Leaf.NotAfter.Unix()))
	}
	for h, err := range st.errs {
		infos = append(infos, certstore.Info{Host: h, Source: certstore.SourceStatic, State: certstore.StateFailed, Error: err.Error()})
	}
	return have, infos
}

// trackRoutedHosts, under t.mu, marks the exact hosts of snap that need an
// ACME certificate as managed (toManage: the ones new to it), unmanages
// hosts absent from the table for unmanageAfter, and returns the names
// with a certificate state (names).
func (t *tlsEdge) trackRoutedHosts(snap *snapshot) (toManage, names []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if snap != nil && t.cm != nil {
		for name, r := range snap.exact {
			if r.tls == tlsNever || t.staticFor(name) != nil || !certmagic.SubjectQualifiesForCert(name) {
				continue
			}
			if !t.managed[name] {
				t.managed[name] = true
				toManage = append(toManage, name)
				if t.states[name] == nil {
					t.states[name] = &certstore.Info{Host: name, Source: certstore.SourceACME, State: certstore.StatePending}
				}
			}
			delete(t.absentSince, name)
		}
		// A host the table stopped naming (an app removed) is unmanaged
		// after unmanageAfter; a short absence (a sequential replacement's
		// gap) keeps its certificate loaded and renewed.
		var drop []certmagic.SubjectIssuer
		for name := range t.managed {
			if r, ok := snap.exact[name]; ok && r.tls != tlsNever {
				continue
			}
			since, ok := t.absentSince[name]
			if !ok {
				t.absentSince[name] = time.Now()
				continue
			}
			if time.Since(since) >= unmanageAfter {
				drop = append(drop, certmagic.SubjectIssuer{Subject: name})
				delete(t.managed, name)
				delete(t.states, name)
				delete(t.absentSince, name)
				t.notAfter.DeleteLabelValues(name)
			}
		}
		if len(drop) > 0 {
			go t.cache.RemoveManaged(drop) // not under t.mu (certmagic calls back)
			t.logger.Info("certificates no longer managed (hosts not routed)", "count", len(drop))
		}
	}
	names = make([]string, 0, len(t.states))
	for name := range t.states {
		names = append(names, name)
	}
	return toManage, names
}

// cachedLeaves returns the longest-lived leaf certificate in certmagic's
// cache for each of names. certmagic's cache is read without t.mu held
// (certmagic calls back into GetConfigForCert and onEvent, which take
// t.mu).
func (t *tlsEdge) cachedLeaves(names []string) map[string]*x509.Certificate {
	leaves := make(map[string]*x509.Certificate, len(names))
	if t.cache != nil {
		for _, name := range names {
			for _, c := range t.cache.AllMatchingCertificates(name) {
				if l := leaves[name]; l == nil || c.Leaf.NotAfter.After(l.NotAfter) {
					leaves[name] = c.Leaf
				}
			}
		}
	}
	return leaves
}

// managedInfos, under t.mu, records each managed name's unexpired leaf
// in its state, in have and in the expiry gauge, and appends the states
// to infos.
func (t *tlsEdge) managedInfos(names []string, leaves map[string]*x509.Certificate, have map[string]struct{}, infos []certstore.Info) []certstore.Info {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, name := range names {
		in := t.states[name]
		if leaf := leaves[name]; leaf != nil && time.Now().Before(leaf.NotAfter) {
			have[name] = struct{}{}
			in.NotAfter, in.Issuer = leaf.NotAfter.UTC(), certstore.IssuerName(leaf)
			in.State = certstore.StateValid // a failed renewal keeps its Error and RetryAt
			t.notAfter.WithLabelValues(name).Set(float64(leaf.NotAfter.Unix()))
		}
		infos = append(infos, *in)
	}
	return infos
}

// startManaging hands hosts new to ACME management to certmagic (which
// obtains and renews their certificates in the background).
func (t *tlsEdge) startManaging(toManage []string) {
	if len(toManage) > 0 {
		t.logger.Info("managing certificates", "hosts", strings.Join(toManage, ","))
		if err := t.cm.ManageAsync(t.ctx, toManage); err != nil {
			t.logger.Error("certificate management failed to start", "hosts", strings.Join(toManage, ","), "error", err)
		}
	}
}

// writeCertState writes infos, sorted by host, to certs/state.json when
// they changed since the last write.
func (t *tlsEdge) writeCertState(infos []certstore.Info) {
	sort.Slice(infos, func(i, j int) bool { return infos[i].Host < infos[j].Host })
	key := fmt.Sprint(infos)
	if key == t.lastState {
		return // unchanged: no write (and no fsync) every refresh
	}
	if err := certstore.WriteState(t.stateDir, infos); err != nil {
		t.logger.Warn("write certificate state", "error", err)
		return
	}
	t.lastState = key
}
