package edgetls

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countingStorage is a file storage that counts its reads.
type countingStorage struct {
	*certmagic.FileStorage
	loads atomic.Int64
}

func (s *countingStorage) Load(ctx context.Context, key string) ([]byte, error) {
	s.loads.Add(1)
	return s.FileStorage.Load(ctx, key)
}

// acmeCerts is Certs with ACME on (an unreachable CA: nothing is ever
// ordered), over a counting storage.
func acmeCerts(t *testing.T, tab *table, tune func(*ACMEConfig)) (*Certs, *countingStorage) {
	t.Helper()
	dir := t.TempDir()
	st := &countingStorage{FileStorage: &certmagic.FileStorage{Path: filepath.Join(dir, "acme")}}
	c := newCerts(t, dir, tab, func(o *Options) {
		o.ACME = ACMEConfig{CA: "http://127.0.0.1:1/directory"}
		if tune != nil {
			tune(&o.ACME)
		}
		o.Storage = st
	})
	return c, st
}

// On-demand certificates under a routed wildcard are bounded: of 3,000
// names, only OnDemandMaxPending start an order while none finished; once
// orders end, more start until the hourly rate is spent; refusals are
// counted by reason.
func TestOnDemandOrdersAreBoundedByPendingOrdersAndRate(t *testing.T) {
	tab := &table{wildcard: map[string]bool{".wild.test": true}}
	c, _ := acmeCerts(t, tab, func(a *ACMEConfig) { a.OnDemandMaxPending = 5; a.OnDemandPerHour = 8 })
	ctx := context.Background()
	var allowed []string
	for i := range 3000 {
		name := fmt.Sprintf("r%06d.wild.test", i)
		if c.onDemandAllowed(ctx, name) == nil {
			allowed = append(allowed, name)
		}
	}
	require.Len(t, allowed, 5, "pending orders bound")
	for _, n := range allowed {
		require.NoError(t, c.onEvent(ctx, "cert_failed", map[string]any{"identifier": n, "error": errors.New("unreachable CA")}))
	}
	more := 0
	for i := range 3000 {
		if c.onDemandAllowed(ctx, fmt.Sprintf("s%06d.wild.test", i)) == nil {
			more++
		}
	}
	assert.Equal(t, 3, more, "the hourly rate (8) bounds the rest")
	assert.Error(t, c.onDemandAllowed(ctx, allowed[0]), "one order per name per interval")
	assert.Equal(t, float64(2995), testutil.ToFloat64(c.odRefused.WithLabelValues("pending")), "refused while 5 were pending")
	assert.Equal(t, float64(2997), testutil.ToFloat64(c.odRefused.WithLabelValues("rate")), "refused once 8 had started")
	c.mu.Lock()
	defer c.mu.Unlock()
	assert.LessOrEqual(t, len(c.states), 8, "only names that started an order have a state")
}

// With an ask URL, an on-demand order starts only for a name it answers
// 200 for (GET <url>?domain=<name>); a refused name takes no token of the
// rate.
func TestOnDemandAskURLDecides(t *testing.T) {
	var asked atomic.Int64
	ask := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		if r.URL.Query().Get("domain") != "ok.wild.test" {
			w.WriteHeader(http.StatusForbidden)
		}
	}))
	t.Cleanup(ask.Close)
	tab := &table{wildcard: map[string]bool{".wild.test": true}}
	c, _ := acmeCerts(t, tab, func(a *ACMEConfig) { a.OnDemandAsk = ask.URL + "/check"; a.OnDemandPerHour = 1 })
	ctx := context.Background()
	for i := range 20 {
		assert.Error(t, c.onDemandAllowed(ctx, fmt.Sprintf("x%d.wild.test", i)))
	}
	assert.NoError(t, c.onDemandAllowed(ctx, "ok.wild.test"), "approved, and the one token is still there")
	assert.Equal(t, int64(21), asked.Load())
	assert.Error(t, c.onDemandAllowed(ctx, "other.test"), "not under a routed wildcard: not even asked")
	assert.Equal(t, int64(21), asked.Load())

	_, err := New(Options{StateDir: t.TempDir(), ACME: ACMEConfig{OnDemandAsk: "ftp://x"}, Logger: c.logger, Registerer: prometheus.NewRegistry()})
	assert.ErrorContains(t, err, "--on-demand-ask")
}

// An HTTP-01 challenge request reads the certificate storage for a host
// the route table serves over HTTPS, for other hosts only at a trickle,
// and a host found without a challenge is not read again within the miss
// TTL: 500 requests with random Hosts read at most the unrouted rate; 200
// with random tokens for one routed host read once; random names under a
// routed wildcard read at most the lookups' rate.
func TestACMEChallengeReadsStorageOnlyForHTTPSHostsWithMissesRemembered(t *testing.T) {
	tab := &table{exact: map[string]bool{"a.test": true, "plain.test": false}, wildcard: map[string]bool{".wild.test": true}}
	c, st := acmeCerts(t, tab, nil)
	c.challenges.missTTL = time.Hour
	countedBefore := st.loads.Load()
	get := func(host string, i int) bool {
		r := httptest.NewRequest(http.MethodGet, fmt.Sprintf("http://%s/.well-known/acme-challenge/tok%d", host, i), nil)
		return c.HandleHTTPChallenge(httptest.NewRecorder(), r)
	}
	base := st.loads.Load()
	start := time.Now()
	for i := range 500 {
		assert.False(t, get(fmt.Sprintf("h%d.example", i), i))
	}
	assert.False(t, get("plain.test", 0))
	unrouted := int64(2*unroutedReadsPerSecond) + int64(time.Since(start).Seconds()*unroutedReadsPerSecond) + 1
	assert.LessOrEqual(t, st.loads.Load()-base, unrouted, "hosts not served over HTTPS: a trickle")
	base = st.loads.Load()
	for i := range 200 {
		assert.False(t, get("a.test", i))
	}
	assert.Equal(t, base+1, st.loads.Load(), "one routed host: one read, the miss remembered")
	start = time.Now()
	for i := range 500 {
		get(fmt.Sprintf("n%d.wild.test", i), i)
	}
	bound := int64(2*challengeReadsPerSecond) + int64(time.Since(start).Seconds()*challengeReadsPerSecond) + 1
	assert.LessOrEqual(t, st.loads.Load()-base-1, bound, "names under a wildcard: at most the lookups' rate")
	assert.Equal(t, float64(st.loads.Load()-countedBefore), testutil.ToFloat64(c.challengeReads))
}
