package swarm

import (
	"testing"

	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/swarm"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

func publishedPorts(s swarm.ServiceSpec) []uint32 {
	var out []uint32
	for _, p := range s.EndpointSpec.Ports {
		if p.PublishMode == swarm.PortConfigPublishModeHost && p.TargetPort == p.PublishedPort {
			out = append(out, p.PublishedPort)
		}
	}
	return out
}

// With HTTPS and TCP ports the edge service publishes HTTP, HTTPS and
// every TCP port in host mode, runs gordon-edge with --https-addr, the
// shared certificate storage on gordon-reconcile and the ACME flags, and
// mounts the CA root's Docker config read-only where --acme-ca-root
// points; --no-acme passes --acme=false and mounts nothing; a public CA
// gets the nodes' system roots. Each change is a new config label.
func TestEdgeSpec_PublishesHTTPSAndTCPPortsWithTheSharedCertStorage(t *testing.T) {
	base := EdgeService{Config: Config{Network: "gordon-edge", Service: "gordon-edge", AdminPort: 9180, HTTPPort: 80, Image: "reg/gordon-edge@sha256:abc"}, ControlSecretID: "sid", ControlSecretName: "gordon-edge-control-x"}
	plain := edgeSpec(base)
	assert.Equal(t, []uint32{80}, publishedPorts(plain))
	assert.NotContains(t, plain.TaskTemplate.ContainerSpec.Args, "--cert-storage")

	e := base
	e.HTTPSPort, e.TCPPorts = 443, []int{5432, 9000}
	e.ACME = ACME{Email: "ops@example.com", CA: "https://acme.example/dir", CARootConfig: CARootConfigName([]byte("PEM"))}
	e.CARootConfigID = "cfg123"
	s := edgeSpec(e)
	assert.Equal(t, []uint32{80, 443, 5432, 9000}, publishedPorts(s))
	assert.Len(t, s.EndpointSpec.Ports, 4, "only host-mode ports")
	cs := s.TaskTemplate.ContainerSpec
	assert.Equal(t, []string{"run", "--state-dir", "/state", "--http-addr", ":80", "--admin-addr", "0.0.0.0:9180", "--peers", "tasks.gordon-edge", "--control-file", ControlSecretPath, "--dial-timeout", "1s",
		"--https-addr", ":443", "--cert-storage", "https://gordon-reconcile:9190",
		"--acme-email", "ops@example.com", "--acme-ca", "https://acme.example/dir", "--acme-ca-root", CARootPath}, cs.Args)
	require.Len(t, cs.Configs, 1)
	c := cs.Configs[0]
	assert.Equal(t, "cfg123", c.ConfigID)
	assert.Regexp(t, `^gordon-edge-acme-ca-root-[0-9a-f]{12}$`, c.ConfigName)
	assert.Equal(t, CARootPath, c.File.Name)
	assert.Equal(t, uint32(0o444), uint32(c.File.Mode), "read-only")
	for _, m := range cs.Mounts {
		assert.NotEqual(t, mount.TypeBind, m.Type, "a private CA root needs no host roots")
	}
	assert.NotEqual(t, plain.Labels[labelConfig], s.Labels[labelConfig], "new ports are an update")

	off := e
	off.ACME = ACME{Off: true}
	so := edgeSpec(off)
	assert.Equal(t, []string{"--https-addr", ":443", "--cert-storage", CertStorageURL, "--acme=false"}, so.TaskTemplate.ContainerSpec.Args[13:])
	assert.Empty(t, so.TaskTemplate.ContainerSpec.Configs)

	pub := e
	pub.ACME, pub.CARootConfigID = ACME{Email: "ops@example.com"}, ""
	sp := edgeSpec(pub)
	assert.Contains(t, sp.TaskTemplate.ContainerSpec.Mounts, mount.Mount{Type: mount.TypeBind, Source: "/etc/ssl/certs", Target: "/etc/ssl/certs", ReadOnly: true},
		"a public CA is verified with the node's system roots (the image is FROM scratch)")

	fewer := e
	fewer.TCPPorts = []int{9000}
	assert.NotEqual(t, s.Labels[labelConfig], edgeSpec(fewer).Labels[labelConfig], "a removed TCP port is an update")
}

// --tcp-ports: comma-separated, sorted, none twice, each 1-65535 and not
// the edge's HTTP, HTTPS or admin port; "" is none. Every refusal is
// core.ErrInvalid naming the port.
func TestParseTCPPorts_ValidPortsNotTheEdgesOwn(t *testing.T) {
	got, err := ParseTCPPorts(" 9001,5432 ,9000", 80, 443, 9180)
	require.NoError(t, err)
	assert.Equal(t, []int{5432, 9000, 9001}, got)
	got, err = ParseTCPPorts("", 80, 0, 9180)
	require.NoError(t, err)
	assert.Empty(t, got)
	got, err = ParseTCPPorts("443", 80, 0, 9180)
	require.NoError(t, err, "443 is free without HTTPS")
	assert.Equal(t, []int{443}, got)
	for list, want := range map[string]string{
		"0": `"0" is not a port`, "65536": `"65536" is not a port`, "x": `"x" is not a port`, "-1": "not a port",
		"80": "80 is the HTTP port", "443": "443 is the HTTPS port", "9180": "9180 is the edge's admin port",
		"9000,9000": "9000 is given twice",
	} {
		_, err := ParseTCPPorts(list, 80, 443, 9180)
		require.ErrorIs(t, err, core.ErrInvalid, list)
		assert.Contains(t, err.Error(), want, list)
	}
}

func tcpSpec(publish ...string) core.AppSpec {
	var tcp []core.L4Interface
	for _, p := range publish {
		tcp = append(tcp, core.L4Interface{Port: 5432, Publish: p})
	}
	return core.AppSpec{Name: "db", Services: []core.ServiceSpec{{Name: "db", TCP: tcp}}}
}

// A TCP bind is deployable on a swarm only on a port the edge publishes,
// on a wildcard address; the refusal names the port and the command that
// publishes it (with the ports already published); UDP is refused (the
// swarm edge publishes none); HTTP-only apps pass.
func TestCheckBinds_ATCPBindNeedsAPublishedPort(t *testing.T) {
	c := Config{TCPPorts: []int{9000}}
	require.NoError(t, c.CheckBinds(tcpSpec("0.0.0.0:9000")))
	require.NoError(t, c.CheckBinds(tcpSpec("[::]:9000")))
	require.NoError(t, c.CheckBinds(core.AppSpec{Name: "web", Services: []core.ServiceSpec{{Name: "web", HTTP: []core.HTTPInterface{{Port: 8080, Host: "web.example"}}}}}))

	err := c.CheckBinds(tcpSpec("0.0.0.0:9001"))
	require.ErrorIs(t, err, core.ErrInvalid)
	assert.Contains(t, err.Error(), "service db: tcp publish \"0.0.0.0:9001\": the swarm edge does not publish port 9001 (it publishes TCP 9000)")
	assert.Contains(t, err.Error(), "docker gordon system start --tcp-ports 9000,9001")

	err = Config{}.CheckBinds(tcpSpec("0.0.0.0:9001"))
	require.ErrorIs(t, err, core.ErrInvalid)
	assert.Contains(t, err.Error(), "(it publishes no TCP port)")
	assert.Contains(t, err.Error(), "--tcp-ports 9001`")

	err = c.CheckBinds(tcpSpec("127.0.0.1:9000"))
	require.ErrorIs(t, err, core.ErrInvalid)
	assert.Contains(t, err.Error(), `give "0.0.0.0:9000"`)

	udp := core.AppSpec{Name: "dns", Services: []core.ServiceSpec{{Name: "dns", UDP: []core.L4Interface{{Port: 53, Publish: "0.0.0.0:53"}}}}}
	err = c.CheckBinds(udp)
	require.ErrorIs(t, err, core.ErrInvalid)
	assert.Contains(t, err.Error(), "publishes no UDP port")
}
