package sdktest_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/sdktest"
	"github.com/gordon-deploy/docker-gordon/plugins/traffic/edge"
)

// R63: AddCert/RemoveCert/ListCerts cross the plugin wire with their error
// classes; the graph's tls and protocol fields round-trip.
func TestR63_CertStoreOverTheTrafficPlugin(t *testing.T) {
	tr := sdktest.ServeTraffic(t, edge.New(t.TempDir()))
	cs, ok := tr.(core.CertStore)
	require.True(t, ok, "the traffic client implements core.CertStore")
	ctx := context.Background()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(9), Subject: pkix.Name{CommonName: "wire CA"}, DNSNames: []string{"*.wire.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kder, _ := x509.MarshalPKCS8PrivateKey(key)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})

	_, err = cs.AddCert(ctx, "wire.test", certPEM, keyPEM)
	require.ErrorIs(t, err, core.ErrInvalid)
	assert.Contains(t, err.Error(), "does not cover wire.test")
	info, err := cs.AddCert(ctx, "*.wire.test", certPEM, keyPEM)
	require.NoError(t, err)
	assert.Equal(t, "wire CA", info.Issuer)
	infos, err := cs.ListCerts(ctx)
	require.NoError(t, err)
	require.Len(t, infos, 1)
	assert.Equal(t, "*.wire.test", infos[0].Host)
	assert.Equal(t, info.NotAfter.Unix(), infos[0].NotAfter.Unix())
	require.ErrorIs(t, cs.RemoveCert(ctx, "nope.wire.test"), core.ErrNotFound)
	require.NoError(t, cs.RemoveCert(ctx, "*.wire.test"))

	fake := &recTraffic{gen: 3}
	tr2 := sdktest.ServeTraffic(t, fake)
	g := routetable.Graph{HTTP: []routetable.HTTPRoute{{Host: "g.test", App: "a", Service: "s", TLS: "always", Protocol: "h2c",
		Backends: []routetable.Backend{{Addr: "127.0.0.1:1", Container: "c"}}}}}
	_, err = tr2.Apply(ctx, g)
	require.NoError(t, err)
	fake.mu.Lock()
	assert.Equal(t, g, fake.graph)
	fake.mu.Unlock()
	_, err = tr2.(core.CertStore).ListCerts(ctx)
	require.Error(t, err, "a traffic backend without certificates says so")
	assert.Contains(t, err.Error(), "not implemented")
}
