package edgeproxy_test

import (
	"crypto/tls"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/edgeproxy"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/certstore"
)

// noSNI handshakes with e without a server name (a client by IP address)
// and returns the certificate's names, or the handshake error.
func noSNI(t *testing.T, e *edge) ([]string, error) {
	t.Helper()
	c, err := tls.Dial("tcp", e.srv.HTTPSAddr(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	require.Empty(t, c.ConnectionState().ServerName)
	return c.ConnectionState().PeerCertificates[0].DNSNames, nil
}

// R62/R63 (TLS without SNI): a handshake without a server name gets the
// edge's only certificate, and its request is routed by Host as any
// other; with several certificates it gets the one Config.DefaultCertHost
// (--default-cert) names, and without that name it fails. Before, every
// such handshake failed with alert internal_error.
func TestR63_HandshakeWithoutSNIGetsTheDefaultCertificate(t *testing.T) {
	b := nameBackend(t, "only")
	e, ca := tlsH1Edge(t, "only.test", b)
	names, err := noSNI(t, e)
	require.NoError(t, err, "the only certificate")
	assert.Equal(t, []string{"only.test"}, names)
	c, err := tls.Dial("tcp", e.srv.HTTPSAddr(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "GET / HTTP/1.1\r\nHost: only.test\r\nConnection: close\r\n\r\n")
	require.NoError(t, err)
	out, _ := io.ReadAll(c)
	assert.True(t, strings.HasPrefix(string(out), "HTTP/1.1 200"), "%s", out)

	// Two certificates: no default unless one is named.
	cp, kp := ca.valid(t, "two.test")
	_, err = certstore.AddStatic(e.stateDir, "two.test", cp, kp, time.Now())
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, err := noSNI(t, e); return err != nil }, 10*time.Second, 20*time.Millisecond,
		"two certificates and no default: the handshake fails")

	e2 := startEdge(t, func(c *edgeproxy.Config) {
		c.HTTPSAddr, c.ACME.Disabled, c.DefaultCertHost = "127.0.0.1:0", true, "two.test"
	})
	for _, h := range []string{"only.test", "two.test"} {
		cp, kp := ca.valid(t, h)
		_, err = certstore.AddStatic(e2.stateDir, h, cp, kp, time.Now())
		require.NoError(t, err)
	}
	e2.publish(t, httpTable(1, tlsRoute("only.test", "", addrOf(b)), tlsRoute("two.test", "", addrOf(b))))
	require.Eventually(t, func() bool {
		names, err := noSNI(t, e2)
		return err == nil && len(names) == 1 && names[0] == "two.test"
	}, 10*time.Second, 20*time.Millisecond, "the named default certificate")
}
