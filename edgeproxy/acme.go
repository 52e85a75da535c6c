package edgeproxy

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/hashicorp/go-hclog"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/certstore"
)

// obtainRetry approximates certmagic's retry schedule after a failed
// order (its first intervals), for the retry_at shown by certs ls.
var obtainRetry = []time.Duration{time.Minute, 2 * time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute}

// setupACME builds certmagic's cache, config and ACME issuer over the file
// storage <state>/edge/certs/acme (0700 directories, 0600 files, written
// atomically by certmagic's FileStorage).
func (t *tlsEdge) setupACME() error {
	ac := t.s.cfg.ACME
	var roots *x509.CertPool
	if len(ac.CARootPEM) > 0 {
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(ac.CARootPEM) {
			return errors.New("gordon-edge: --acme-ca-root: no PEM certificate in the file")
		}
	}
	zl := zap.New(zapcore.NewCore(
		zapcore.NewConsoleEncoder(zap.NewProductionEncoderConfig()),
		zapcore.AddSync(t.logger.StandardWriter(&hclog.StandardLoggerOptions{ForceLevel: hclog.Warn})),
		zapcore.WarnLevel))
	storage := &certmagic.FileStorage{Path: filepath.Join(certstore.Root(t.stateDir), certstore.ACMEDir)}
	// Two configs over one cache and one storage: cm manages the exact
	// routed hosts in the background; od obtains names under a routed
	// wildcard on demand (certmagic defers every name of a config with
	// OnDemand set to the handshake, so they cannot be one config).
	var cm, od *certmagic.Config
	t.cache = certmagic.NewCache(certmagic.CacheOptions{
		GetConfigForCert: func(c certmagic.Certificate) (*certmagic.Config, error) {
			t.mu.Lock()
			defer t.mu.Unlock()
			for _, n := range c.Names {
				if t.managed[n] {
					return cm, nil
				}
			}
			return od, nil
		},
		RenewCheckInterval: ac.RenewCheckInterval,
		Logger:             zl,
	})
	ca := ac.CA
	if ca == "" {
		ca = certmagic.LetsEncryptProductionCA
	}
	newConfig := func(onDemand *certmagic.OnDemandConfig) (*certmagic.Config, *certmagic.ACMEIssuer) {
		c := certmagic.New(t.cache, certmagic.Config{
			Storage:            storage,
			Logger:             zl,
			RenewalWindowRatio: ac.RenewWindow,
			OnEvent:            t.onEvent,
			OnDemand:           onDemand,
		})
		iss := certmagic.NewACMEIssuer(c, certmagic.ACMEIssuer{
			CA:                      ca,
			Email:                   ac.Email,
			Agreed:                  true,
			TrustedRoots:            roots,
			DisableHTTPChallenge:    ac.DisableHTTP01,
			DisableTLSALPNChallenge: ac.DisableTLSALPN01,
			Logger:                  zl,
		})
		c.Issuers = []certmagic.Issuer{iss}
		return c, iss
	}
	cm, t.issuer = newConfig(nil)
	od, t.odIssuer = newConfig(&certmagic.OnDemandConfig{DecisionFunc: t.onDemandAllowed})
	t.cm, t.od = cm, od
	return nil
}

// setHTTPPort tells the HTTP-01 solver which port the edge's own plain
// listener serves (it then answers challenges through ServeHTTP instead
// of binding a port itself).
func (t *tlsEdge) setHTTPPort(port int) {
	if t.issuer != nil {
		t.issuer.AltHTTPPort = port
		t.odIssuer.AltHTTPPort = port
	}
}

// onDemandAllowed is certmagic's on-demand decision: only a name under a
// wildcard the serving snapshot routes (tls not "never"), no exact host
// (those are managed) and at most one order per name per OnDemandInterval.
func (t *tlsEdge) onDemandAllowed(_ context.Context, name string) error {
	snap := t.s.snap.Load()
	if snap == nil {
		return errOnDemandRefused
	}
	if _, exact := snap.exact[name]; exact {
		return fmt.Errorf("gordon-edge: %s is managed, not on demand", name)
	}
	rt := snap.matchWildcard(name)
	if rt == nil || rt.tls == tlsNever {
		return fmt.Errorf("%w: %s", errOnDemandRefused, name)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if last, ok := t.onDemandAt[name]; ok && time.Since(last) < t.odInterval {
		return fmt.Errorf("gordon-edge: on-demand certificate for %s rate-limited (one order per %s)", name, t.odInterval)
	}
	if len(t.onDemandAt) > 10000 {
		for n, at := range t.onDemandAt {
			if time.Since(at) >= t.odInterval {
				delete(t.onDemandAt, n)
			}
		}
	}
	t.onDemandAt[name] = time.Now()
	if t.states[name] == nil {
		t.states[name] = &certstore.Info{Host: name, Source: certstore.SourceACME, State: certstore.StatePending}
	}
	return nil
}

// onEvent records certmagic's outcomes per host (state, last error, next
// retry), logs and counts them.
func (t *tlsEdge) onEvent(_ context.Context, event string, data map[string]any) error {
	name, _ := data["identifier"].(string)
	switch event {
	case "cert_obtaining":
		t.mu.Lock()
		in := t.stateLocked(name)
		if in.State != certstore.StateValid {
			in.State = certstore.StatePending
		}
		t.mu.Unlock()
	case "cert_obtained":
		renewal, _ := data["renewal"].(bool)
		t.logger.Info("certificate obtained", "host", name, "renewal", renewal)
		ev := "obtained"
		if renewal {
			ev = "renewed"
		}
		t.certEvents.WithLabelValues(ev).Inc()
		t.mu.Lock()
		in := t.stateLocked(name)
		in.State, in.Error, in.RetryAt = certstore.StateValid, "", time.Time{}
		t.failures[name] = 0
		t.mu.Unlock()
		go t.refresh(true)
	case "cached_managed_cert":
		if sans, ok := data["sans"].([]string); ok {
			t.mu.Lock()
			for _, n := range sans {
				in := t.stateLocked(n)
				if in.State == certstore.StatePending {
					in.State = certstore.StateValid
				}
			}
			t.mu.Unlock()
			go t.refresh(true)
		}
	case "cert_failed":
		err, _ := data["error"].(error)
		msg := "unknown error"
		if err != nil {
			msg = err.Error()
		}
		renewal, _ := data["renewal"].(bool)
		t.logger.Error("certificate order failed; other hosts are not affected", "host", name, "renewal", renewal, "error", msg)
		t.certEvents.WithLabelValues("failed").Inc()
		t.mu.Lock()
		in := t.stateLocked(name)
		n := t.failures[name]
		t.failures[name] = n + 1
		in.Error = msg
		in.RetryAt = time.Now().Add(obtainRetry[min(n, len(obtainRetry)-1)]).UTC()
		if in.NotAfter.IsZero() || time.Now().After(in.NotAfter) {
			in.State = certstore.StateFailed
		}
		t.mu.Unlock()
		go t.refresh(true)
	}
	return nil
}

func (t *tlsEdge) stateLocked(name string) *certstore.Info {
	in := t.states[name]
	if in == nil {
		in = &certstore.Info{Host: name, Source: certstore.SourceACME, State: certstore.StatePending}
		t.states[name] = in
	}
	return in
}
