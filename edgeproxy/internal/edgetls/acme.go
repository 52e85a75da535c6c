package edgetls

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

var errOnDemandRefused = errors.New("gordon-edge: not a name under a routed wildcard")

// obtainRetry approximates certmagic's retry schedule after a failed
// order (its first intervals), for the retry_at shown by certs ls.
var obtainRetry = []time.Duration{time.Minute, 2 * time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute}

// setupACME builds certmagic's cache, config and ACME issuer over the file
// storage <state>/edge/certs/acme (0700 directories, 0600 files, written
// atomically by certmagic's FileStorage), or over Options.Storage.
func (c *Certs) setupACME() error {
	ac := c.opts.ACME
	var roots *x509.CertPool
	if len(ac.CARootPEM) > 0 {
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(ac.CARootPEM) {
			return errors.New("gordon-edge: --acme-ca-root: no PEM certificate in the file")
		}
	}
	zl := zap.New(zapcore.NewCore(
		zapcore.NewConsoleEncoder(zap.NewProductionEncoderConfig()),
		zapcore.AddSync(c.logger.StandardWriter(&hclog.StandardLoggerOptions{ForceLevel: hclog.Warn})),
		zapcore.WarnLevel))
	var storage certmagic.Storage = &certmagic.FileStorage{Path: filepath.Join(certstore.Root(c.stateDir), certstore.ACMEDir)}
	if c.opts.Storage != nil {
		storage = c.opts.Storage
	}
	// Two configs over one cache and one storage: cm manages the exact
	// routed hosts in the background; od obtains names under a routed
	// wildcard on demand (certmagic defers every name of a config with
	// OnDemand set to the handshake, so they cannot be one config).
	var cm, od *certmagic.Config
	c.cache = certmagic.NewCache(certmagic.CacheOptions{
		GetConfigForCert: func(crt certmagic.Certificate) (*certmagic.Config, error) {
			c.mu.Lock()
			defer c.mu.Unlock()
			for _, n := range crt.Names {
				if c.managed[n] {
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
		cfg := certmagic.New(c.cache, certmagic.Config{
			Storage:            storage,
			Logger:             zl,
			RenewalWindowRatio: ac.RenewWindow,
			OnEvent:            c.onEvent,
			OnDemand:           onDemand,
		})
		iss := certmagic.NewACMEIssuer(cfg, certmagic.ACMEIssuer{
			CA:                      ca,
			Email:                   ac.Email,
			Agreed:                  true,
			TrustedRoots:            roots,
			DisableHTTPChallenge:    ac.DisableHTTP01,
			DisableTLSALPNChallenge: ac.DisableTLSALPN01,
			Logger:                  zl,
		})
		cfg.Issuers = []certmagic.Issuer{iss}
		return cfg, iss
	}
	bounds, err := newOnDemandBounds(ac)
	if err != nil {
		return err
	}
	c.odBounds = bounds
	cm, c.issuer = newConfig(nil)
	od, c.odIssuer = newConfig(&certmagic.OnDemandConfig{DecisionFunc: c.onDemandAllowed})
	c.cm, c.od = cm, od
	return nil
}

// SetHTTPPort tells the HTTP-01 solver which port the edge's own plain
// listener serves (it then answers challenges through ServeHTTP instead
// of binding a port itself).
func (c *Certs) SetHTTPPort(port int) {
	if c.issuer != nil {
		c.issuer.AltHTTPPort = port
		c.odIssuer.AltHTTPPort = port
	}
}

// SetTLSPort tells the TLS-ALPN-01 solver which port the edge's HTTPS
// listener serves (it then answers challenges in the edge's handshakes).
func (c *Certs) SetTLSPort(port int) {
	if c.issuer != nil {
		c.issuer.AltTLSALPNPort = port
		c.odIssuer.AltTLSALPNPort = port
	}
}

// onDemandAllowed is certmagic's on-demand decision: only a name under a
// wildcard the serving snapshot routes (tls not "never"), no exact host
// (those are managed), at most one order per name per OnDemandInterval,
// fewer than OnDemandMaxPending orders under way, the ask URL's approval
// when one is set, and a token of the OnDemandPerHour bucket (taken last:
// a refused name costs none). Refusals are counted
// (gordon_edge_tls_on_demand_refused_total{reason}).
func (c *Certs) onDemandAllowed(ctx context.Context, name string) error {
	rt, ok := c.route(name)
	if ok && rt.Exact {
		return fmt.Errorf("gordon-edge: %s is managed, not on demand", name)
	}
	if !ok || !rt.HTTPS {
		c.odRefused.WithLabelValues("not_routed").Inc()
		return fmt.Errorf("%w: %s", errOnDemandRefused, name)
	}
	c.mu.Lock()
	if last, ok := c.onDemandAt[name]; ok && time.Since(last) < c.odInterval {
		c.mu.Unlock()
		c.odRefused.WithLabelValues("name_interval").Inc()
		return fmt.Errorf("gordon-edge: on-demand certificate for %s rate-limited (one order per %s)", name, c.odInterval)
	}
	if c.odBounds.pendingLocked(c.odInterval) >= c.odBounds.maxPending {
		c.mu.Unlock()
		c.odRefused.WithLabelValues("pending").Inc()
		return fmt.Errorf("gordon-edge: on-demand certificate for %s refused: %d orders under way already; retry later", name, c.odBounds.maxPending)
	}
	c.odBounds.pending[name] = time.Now() // reserved: dropped on a refusal below or at the order's outcome
	c.mu.Unlock()
	if err := c.odBounds.asks(ctx, name); err != nil {
		c.dropPending(name)
		c.odRefused.WithLabelValues("ask").Inc()
		return err
	}
	if !c.odBounds.limiter.Allow() {
		c.dropPending(name)
		c.odRefused.WithLabelValues("rate").Inc()
		return fmt.Errorf("gordon-edge: on-demand certificate for %s refused: the edge's on-demand order rate is spent; retry later", name)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.onDemandAt) > 10000 {
		for n, at := range c.onDemandAt {
			if time.Since(at) >= c.odInterval {
				delete(c.onDemandAt, n)
			}
		}
	}
	c.onDemandAt[name] = time.Now()
	if c.states[name] == nil {
		c.states[name] = &certstore.Info{Host: name, Source: certstore.SourceACME, State: certstore.StatePending}
	}
	return nil
}

// dropPending ends name's count among the pending on-demand orders.
func (c *Certs) dropPending(name string) {
	if c.odBounds == nil {
		return
	}
	c.mu.Lock()
	delete(c.odBounds.pending, name)
	c.mu.Unlock()
}

// onEvent records certmagic's outcomes per host (state, last error, next
// retry), logs and counts them.
func (c *Certs) onEvent(_ context.Context, event string, data map[string]any) error {
	name, _ := data["identifier"].(string)
	switch event {
	case "cert_obtaining":
		c.mu.Lock()
		in := c.stateLocked(name)
		if in.State != certstore.StateValid {
			in.State = certstore.StatePending
		}
		c.mu.Unlock()
	case "cert_obtained":
		renewal, _ := data["renewal"].(bool)
		c.logger.Info("certificate obtained", "host", name, "renewal", renewal)
		ev := "obtained"
		if renewal {
			ev = "renewed"
		}
		c.certEvents.WithLabelValues(ev).Inc()
		c.mu.Lock()
		in := c.stateLocked(name)
		in.State, in.Error, in.RetryAt = certstore.StateValid, "", time.Time{}
		c.failures[name] = 0
		c.mu.Unlock()
		c.dropPending(name)
		go c.Refresh(true)
	case "cached_managed_cert":
		if sans, ok := data["sans"].([]string); ok {
			c.mu.Lock()
			for _, n := range sans {
				in := c.stateLocked(n)
				if in.State == certstore.StatePending {
					in.State = certstore.StateValid
				}
				if c.odBounds != nil {
					delete(c.odBounds.pending, n) // loaded from the storage: no order under way
				}
			}
			c.mu.Unlock()
			go c.Refresh(true)
		}
	case "cert_failed":
		err, _ := data["error"].(error)
		msg := "unknown error"
		if err != nil {
			msg = err.Error()
		}
		renewal, _ := data["renewal"].(bool)
		c.logger.Error("certificate order failed; other hosts are not affected", "host", name, "renewal", renewal, "error", msg)
		c.certEvents.WithLabelValues("failed").Inc()
		c.mu.Lock()
		in := c.stateLocked(name)
		n := c.failures[name]
		c.failures[name] = n + 1
		in.Error = msg
		in.RetryAt = time.Now().Add(obtainRetry[min(n, len(obtainRetry)-1)]).UTC()
		if in.NotAfter.IsZero() || time.Now().After(in.NotAfter) {
			in.State = certstore.StateFailed
		}
		c.mu.Unlock()
		c.dropPending(name)
		go c.Refresh(true)
	}
	return nil
}

func (c *Certs) stateLocked(name string) *certstore.Info {
	in := c.states[name]
	if in == nil {
		in = &certstore.Info{Host: name, Source: certstore.SourceACME, State: certstore.StatePending}
		c.states[name] = in
	}
	return in
}
