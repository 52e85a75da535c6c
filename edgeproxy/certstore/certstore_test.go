package certstore_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/certstore"
)

func pair(t testing.TB, nb, na time.Time, names ...string) ([]byte, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: names[0]}, Issuer: pkix.Name{CommonName: names[0]},
		DNSNames: names, NotBefore: nb, NotAfter: na}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func valid(t testing.TB, names ...string) ([]byte, []byte) {
	return pair(t, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), names...)
}

// R63: certs add refuses a pair that does not parse, does not match, does
// not cover the host or is expired, and a refusal writes nothing.
func TestAddStaticRefusalsChangeNothing(t *testing.T) {
	dir := t.TempDir()
	c, k := valid(t, "a.test")
	_, otherKey := valid(t, "a.test")
	wc, wk := valid(t, "*.w.test")
	old, oldKey := pair(t, time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour), "a.test")
	cases := []struct {
		name, host string
		cert, key  []byte
		want       string
	}{
		{"garbage cert", "a.test", []byte("nope"), k, "no PEM"},
		{"garbage key", "a.test", c, []byte("nope"), "no PEM private key"},
		{"mismatch", "a.test", c, otherKey, "does not match"},
		{"not covered", "b.test", c, k, "does not cover b.test"},
		{"wildcard cert for apex", "w.test", wc, wk, "does not cover"},
		{"exact cert for wildcard", "*.a.test", c, k, "does not cover"},
		{"expired", "a.test", old, oldKey, "expired"},
		{"bad host", "A B", c, k, "host"},
	}
	for _, tc := range cases {
		_, err := certstore.AddStatic(dir, tc.host, tc.cert, tc.key, time.Now())
		require.ErrorIs(t, err, certstore.ErrInvalid, tc.name)
		assert.Contains(t, err.Error(), tc.want, tc.name)
	}
	_, err := os.Stat(filepath.Join(certstore.Root(dir), certstore.StaticDir))
	assert.True(t, os.IsNotExist(err), "nothing written by refusals")

	in, err := certstore.AddStatic(dir, "*.w.test", wc, wk, time.Now())
	require.NoError(t, err)
	assert.Equal(t, "*.w.test", in.Host)
	assert.Equal(t, certstore.SourceStatic, in.Source)
	infos, err := certstore.List(dir, time.Now())
	require.NoError(t, err)
	require.Len(t, infos, 1)
	assert.Equal(t, certstore.StateValid, infos[0].State)
	assert.Equal(t, "*.w.test", infos[0].Issuer)
	assert.WithinDuration(t, time.Now().Add(time.Hour), infos[0].NotAfter, 2*time.Second)
	fi, err := os.Stat(filepath.Join(certstore.Root(dir), certstore.StaticDir, "wildcard_.w.test", "key.pem"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	require.ErrorIs(t, certstore.RemoveStatic(dir, "x.test"), certstore.ErrNotFound)
	require.NoError(t, certstore.RemoveStatic(dir, "*.w.test"))
	infos, err = certstore.List(dir, time.Now())
	require.NoError(t, err)
	assert.Empty(t, infos)
}

// A damaged pair on disk is reported failed for its host; the others load.
func TestLoadStaticIsolatesBadPair(t *testing.T) {
	dir := t.TempDir()
	c, k := valid(t, "good.test")
	_, err := certstore.AddStatic(dir, "good.test", c, k, time.Now())
	require.NoError(t, err)
	bad := filepath.Join(certstore.Root(dir), certstore.StaticDir, "bad.test")
	require.NoError(t, os.MkdirAll(bad, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(bad, "cert.pem"), c, 0o600)) // covers good.test only
	require.NoError(t, os.WriteFile(filepath.Join(bad, "key.pem"), k, 0o600))
	got := map[string]certstore.Static{}
	for _, st := range certstore.LoadStatic(dir, time.Now()) {
		got[st.Host] = st
	}
	require.Len(t, got, 2)
	assert.NotNil(t, got["good.test"].Cert)
	assert.Nil(t, got["bad.test"].Cert)
	assert.ErrorIs(t, got["bad.test"].Err, certstore.ErrInvalid)
}

// FuzzParsePair: the certificate and key loader never panics and accepts
// only pairs that cover the host.
func FuzzParsePair(f *testing.F) {
	c, k := valid(f, "f.test")
	f.Add([]byte("f.test"), c, k)
	f.Add([]byte("f.test"), []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), k)
	f.Add([]byte("*.f.test"), c, []byte("-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n"))
	f.Add([]byte("f.test"), c[:len(c)/2], k[:len(k)/2])
	f.Fuzz(func(t *testing.T, host, cert, key []byte) {
		tc, err := certstore.ParsePair(string(host), cert, key, time.Now())
		if err != nil {
			assert.ErrorIs(t, err, certstore.ErrInvalid)
			return
		}
		require.NoError(t, tc.Leaf.VerifyHostname(string(host)))
	})
}
