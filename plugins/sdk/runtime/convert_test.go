package runtime

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"google.golang.org/protobuf/proto"

	"github.com/gordon-deploy/docker-gordon/core"
	pb "github.com/gordon-deploy/docker-gordon/plugins/sdk/proto"
)

// roundTrip sends c through the wire encoding and back.
func roundTrip(t *testing.T, c core.ContainerSpec) core.ContainerSpec {
	t.Helper()
	b, err := proto.Marshal(containerSpecToProto(c))
	assert.NoError(t, err)
	var p pb.ContainerSpec
	assert.NoError(t, proto.Unmarshal(b, &p))
	return containerSpecFromProto(&p)
}

func TestContainerSpec_ContainerKeysCrossTheWire(t *testing.T) {
	c := core.ContainerSpec{
		Name: "gordon-shop-db-01234567", Image: "pg@sha256:abc",
		Entrypoint: []string{"/entry"}, Cmd: []string{"postgres", "-c", "x=1"}, StopSignal: "SIGINT",
		Healthcheck: &core.Healthcheck{Test: []string{"CMD", "/check"}, Interval: core.Duration(2 * time.Second),
			Timeout: core.Duration(time.Second), StartPeriod: core.Duration(30 * time.Second), Retries: 5},
		Options: core.ContainerOptions{
			User: "999:999", WorkingDir: "/srv", Init: true, ReadOnly: true, ShmSize: 256 << 20,
			Tmpfs:   []core.TmpfsMount{{Path: "/run"}, {Path: "/tmp", Options: "size=64m"}},
			Ulimits: []core.Ulimit{{Name: "nofile", Soft: 1024, Hard: 65536}},
			CapAdd:  []string{"NET_ADMIN"}, CapDrop: []string{"ALL"},
			Sysctls: map[string]string{"net.core.somaxconn": "1024"}, ExtraHosts: []string{"m:10.0.0.5"},
			Resources: core.Resources{Memory: 512 << 20, CPUs: 1.5, Pids: 512},
			Logging:   &core.Logging{Driver: "json-file", Options: map[string]string{"max-size": "10m"}},
		},
		RestartPolicy: "unless-stopped",
		Node:          "node-2", // the swarm node it is pinned to
		Mounts: []core.Mount{{Type: core.MountVolume, Source: "shop-data", Target: "/data"},
			{Type: core.MountBind, Source: "/state/tls.key", Target: "/run/secrets/tls.key", ReadOnly: true, Secret: "tls.key"},
			{Type: core.MountBind, Source: "/state/files/shop/ab12-444", Target: "/etc/nginx/nginx.conf", ReadOnly: true, Config: "ab12-444"}},
	}
	assert.Equal(t, c, roundTrip(t, c))

	// nil and empty entrypoints stay apart: keep the image's vs clear it.
	cleared := core.ContainerSpec{Name: "a", Entrypoint: []string{}}
	assert.NotNil(t, roundTrip(t, cleared).Entrypoint)
	assert.Empty(t, roundTrip(t, cleared).Entrypoint)
	assert.Nil(t, roundTrip(t, core.ContainerSpec{Name: "a"}).Entrypoint)
	assert.Nil(t, roundTrip(t, core.ContainerSpec{Name: "a"}).Options.Logging, "no logging: the engine's default")
}

func TestImageRef_ImageConfigCrossesTheWire(t *testing.T) {
	i := core.ImageRef{Ref: "r", Digest: "d", ID: "id", Volumes: []string{"/data"}, StopSignal: "SIGQUIT", HasHealthcheck: true}
	assert.Equal(t, i, imageFromProto(imageToProto(i)))
}
