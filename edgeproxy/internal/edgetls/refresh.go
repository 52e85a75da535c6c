package edgetls

import (
	"crypto/x509"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/caddyserver/certmagic"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/certstore"
)

// unmanageAfter is how long an exact host may be absent from the route
// table before its certificate stops being managed.
const unmanageAfter = 10 * time.Minute

// Refresh rebuilds the served names, the expiry gauges and
// certs/state.json (writeState), calls Options.Refreshed, and hands new
// exact hosts to certmagic. The edge calls it after each apply and every
// full re-read; certmagic's events call it too.
func (c *Certs) Refresh(writeState bool) {
	c.refreshMu.Lock()
	defer c.refreshMu.Unlock()
	if c.ctx.Err() != nil {
		return // closed: nothing more is written under the state directory
	}
	c.reloadStatic()
	tab := c.opts.Routes()
	have, infos := c.staticInfos()
	toManage, names := c.trackRoutedHosts(tab)
	infos = c.managedInfos(names, c.cachedLeaves(names), have, infos)
	c.served.Store(&Served{names: have})
	if tab != nil && c.opts.Refreshed != nil {
		c.opts.Refreshed(tab)
	}
	c.startManaging(toManage)
	if writeState {
		c.writeCertState(infos)
	}
}

// staticInfos returns the hosts static certificates serve (have) and the
// certificate state of every static certificate, loaded or refused, and
// sets the expiry gauges of the loaded ones.
func (c *Certs) staticInfos() (have map[string]struct{}, infos []certstore.Info) {
	st := c.static.Load()
	have = map[string]struct{}{}
	for h, crt := range st.certs {
		have[h] = struct{}{}
		infos = append(infos, certstore.Info{Host: h, Source: certstore.SourceStatic, Issuer: certstore.IssuerName(crt.Leaf), NotAfter: crt.Leaf.NotAfter.UTC(), State: certstore.StateValid})
		c.notAfter.WithLabelValues(h).Set(float64(crt.Leaf.NotAfter.Unix()))
	}
	for h, err := range st.errs {
		infos = append(infos, certstore.Info{Host: h, Source: certstore.SourceStatic, State: certstore.StateFailed, Error: err.Error()})
	}
	return have, infos
}

// trackRoutedHosts, under c.mu, marks the exact hosts of tab that need an
// ACME certificate as managed (toManage: the ones new to it), unmanages
// hosts absent from the table for unmanageAfter, and returns the names
// with a certificate state (names).
func (c *Certs) trackRoutedHosts(tab Table) (toManage, names []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if tab != nil && c.cm != nil {
		tab.ExactHTTPS(func(name string) {
			if c.staticFor(name) != nil || !certmagic.SubjectQualifiesForCert(name) {
				return
			}
			if !c.managed[name] {
				c.managed[name] = true
				toManage = append(toManage, name)
				if c.states[name] == nil {
					c.states[name] = &certstore.Info{Host: name, Source: certstore.SourceACME, State: certstore.StatePending}
				}
			}
			delete(c.absentSince, name)
		})
		c.unmanageAbsent(tab)
	}
	names = make([]string, 0, len(c.states))
	for name := range c.states {
		names = append(names, name)
	}
	return toManage, names
}

// unmanageAbsent, under c.mu, stops managing a host the table stopped
// naming (an app removed) after unmanageAfter; a short absence (a
// sequential replacement's gap) keeps its certificate loaded and renewed.
func (c *Certs) unmanageAbsent(tab Table) {
	var drop []certmagic.SubjectIssuer
	for name := range c.managed {
		if r, ok := tab.Route(name); ok && r.Exact && r.HTTPS {
			continue
		}
		since, ok := c.absentSince[name]
		if !ok {
			c.absentSince[name] = time.Now()
			continue
		}
		if time.Since(since) >= unmanageAfter {
			drop = append(drop, certmagic.SubjectIssuer{Subject: name})
			delete(c.managed, name)
			delete(c.states, name)
			delete(c.absentSince, name)
			c.notAfter.DeleteLabelValues(name)
		}
	}
	if len(drop) > 0 {
		go c.cache.RemoveManaged(drop) // not under c.mu (certmagic calls back)
		c.logger.Info("certificates no longer managed (hosts not routed)", "count", len(drop))
	}
}

// cachedLeaves returns the longest-lived leaf certificate in certmagic's
// cache for each of names. certmagic's cache is read without c.mu held
// (certmagic calls back into GetConfigForCert and onEvent, which take
// c.mu).
func (c *Certs) cachedLeaves(names []string) map[string]*x509.Certificate {
	leaves := make(map[string]*x509.Certificate, len(names))
	if c.cache != nil {
		for _, name := range names {
			for _, crt := range c.cache.AllMatchingCertificates(name) {
				if l := leaves[name]; l == nil || crt.Leaf.NotAfter.After(l.NotAfter) {
					leaves[name] = crt.Leaf
				}
			}
		}
	}
	return leaves
}

// managedInfos, under c.mu, records each managed name's unexpired leaf
// in its state, in have and in the expiry gauge, and appends the states
// to infos.
func (c *Certs) managedInfos(names []string, leaves map[string]*x509.Certificate, have map[string]struct{}, infos []certstore.Info) []certstore.Info {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, name := range names {
		in := c.states[name]
		if leaf := leaves[name]; leaf != nil && time.Now().Before(leaf.NotAfter) {
			have[name] = struct{}{}
			in.NotAfter, in.Issuer = leaf.NotAfter.UTC(), certstore.IssuerName(leaf)
			in.State = certstore.StateValid // a failed renewal keeps its Error and RetryAt
			c.notAfter.WithLabelValues(name).Set(float64(leaf.NotAfter.Unix()))
		}
		infos = append(infos, *in)
	}
	return infos
}

// startManaging hands hosts new to ACME management to certmagic (which
// obtains and renews their certificates in the background).
func (c *Certs) startManaging(toManage []string) {
	if len(toManage) > 0 {
		c.logger.Info("managing certificates", "hosts", strings.Join(toManage, ","))
		if err := c.cm.ManageAsync(c.ctx, toManage); err != nil {
			c.logger.Error("certificate management failed to start", "hosts", strings.Join(toManage, ","), "error", err)
		}
	}
}

// writeCertState writes infos, sorted by host, to certs/state.json when
// they changed since the last write.
func (c *Certs) writeCertState(infos []certstore.Info) {
	sort.Slice(infos, func(i, j int) bool { return infos[i].Host < infos[j].Host })
	key := fmt.Sprint(infos)
	if key == c.lastState {
		return // unchanged: no write (and no fsync) every refresh
	}
	if err := certstore.WriteState(c.stateDir, infos); err != nil {
		c.logger.Warn("write certificate state", "error", err)
		return
	}
	c.lastState = key
}
