package edge_test

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
	"github.com/gordon-deploy/docker-gordon/plugins/traffic/edge"
)

func selfSignedPair(t *testing.T, name string) ([]byte, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ops CA"}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
}

// R63: certs add/rm/ls through the traffic backend; a refused pair is
// core.ErrInvalid and changes nothing, rm of an unknown host ErrNotFound.
func TestTrafficCertStoreAddListRemove(t *testing.T) {
	ctx := context.Background()
	tr := edge.New(t.TempDir())
	c, k := selfSignedPair(t, "shop.test")
	_, other := selfSignedPair(t, "shop.test")

	_, err := tr.AddCert(ctx, "shop.test", c, other)
	require.ErrorIs(t, err, core.ErrInvalid)
	assert.Contains(t, err.Error(), "does not match")
	infos, err := tr.ListCerts(ctx)
	require.NoError(t, err)
	assert.Empty(t, infos, "a refusal stores nothing")

	info, err := tr.AddCert(ctx, "shop.test", c, k)
	require.NoError(t, err)
	assert.Equal(t, "ops CA", info.Issuer)
	infos, err = tr.ListCerts(ctx)
	require.NoError(t, err)
	require.Len(t, infos, 1)
	assert.Equal(t, core.CertInfo{Host: "shop.test", Source: "static", Issuer: "ops CA", NotAfter: info.NotAfter, State: "valid"}, infos[0])

	require.ErrorIs(t, tr.RemoveCert(ctx, "nope.test"), core.ErrNotFound)
	require.NoError(t, tr.RemoveCert(ctx, "shop.test"))
	infos, err = tr.ListCerts(ctx)
	require.NoError(t, err)
	assert.Empty(t, infos)
}
