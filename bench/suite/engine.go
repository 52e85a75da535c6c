package main

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
)

// Labels and names of everything the suite creates in the engine.
const (
	appPrefix   = "gbench-"
	benchLabel  = "dev.gordon.bench"
	gordonApp   = "dev.gordon.app"
	naiveName   = "gbench-naive"
	runBaseName = "gbench-run"
)

// subnetPool hands out /28 subnets from one /16 no engine network uses, so
// that 100 app networks do not exhaust the engine's default address pools
// (about 30 bridge networks), which other work on this engine shares.
type subnetPool struct {
	mu   sync.Mutex
	base netip.Prefix
	next int
}

func newSubnetPool(ctx context.Context, cli *client.Client) (*subnetPool, error) {
	res, err := cli.NetworkList(ctx, client.NetworkListOptions{})
	if err != nil {
		return nil, err
	}
	var used []netip.Prefix
	for _, n := range res.Items {
		for _, c := range n.IPAM.Config {
			if c.Subnet.IsValid() {
				used = append(used, c.Subnet)
			}
		}
	}
	for x := 231; x < 255; x++ {
		cand := netip.MustParsePrefix(fmt.Sprintf("10.%d.0.0/16", x))
		free := true
		for _, u := range used {
			if u.Overlaps(cand) {
				free = false
				break
			}
		}
		if free {
			return &subnetPool{base: cand}, nil
		}
	}
	return nil, fmt.Errorf("no free 10.x.0.0/16 for bench networks")
}

func (p *subnetPool) take() netip.Prefix {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := p.next
	p.next++
	b := p.base.Addr().As4()
	b[2] = byte(i / 16)
	b[3] = byte((i % 16) * 16)
	return netip.PrefixFrom(netip.AddrFrom4(b), 28)
}

// takeWide returns a /26 (61 addresses) of the pool, aligned, for an app
// whose overlap deploy runs 2 × 10 instances (a /28 holds 13).
func (p *subnetPool) takeWide() netip.Prefix {
	p.mu.Lock()
	for p.next%4 != 0 {
		p.next++
	}
	p.mu.Unlock()
	first := p.take()
	for range 3 {
		p.take()
	}
	return netip.PrefixFrom(first.Addr(), 26)
}

// precreateNetwork creates gordon-<app> as the runtime plugin would (bridge,
// labels dev.gordon.app/managed) but with an explicit /28 subnet; the
// deploy's EnsureNetwork then finds and uses it.
func (b *bench) precreateNetwork(ctx context.Context, app string) error {
	return b.precreateNetworkIn(ctx, app, b.subnets.take())
}

// precreateNetworkIn is precreateNetwork with the given subnet.
func (b *bench) precreateNetworkIn(ctx context.Context, app string, subnet netip.Prefix) error {
	name := "gordon-" + app
	_, err := b.cli.NetworkCreate(ctx, name, client.NetworkCreateOptions{
		Driver: "bridge",
		IPAM:   &network.IPAM{Config: []network.IPAMConfig{{Subnet: subnet}}},
		Labels: map[string]string{gordonApp: app, "dev.gordon.managed": "true", benchLabel: "1"},
	})
	if err != nil && !strings.Contains(err.Error(), "already exists") {
		return fmt.Errorf("create network %s: %w", name, err)
	}
	return nil
}

// ours reports whether a resource with these labels/names was made by the
// suite: a gbench- app or the bench label.
func ours(labels map[string]string, names ...string) bool {
	if labels[benchLabel] == "1" || strings.HasPrefix(labels[gordonApp], appPrefix) {
		return true
	}
	for _, n := range names {
		if strings.HasPrefix(strings.TrimPrefix(n, "/"), appPrefix) || strings.HasPrefix(strings.TrimPrefix(n, "/"), "gordon-"+appPrefix) {
			return true
		}
	}
	return false
}

// cleanupEngine force-removes every container, then network and volume,
// that the suite created (and nothing else).
func (b *bench) cleanupEngine(ctx context.Context) {
	res, err := b.cli.ContainerList(ctx, client.ContainerListOptions{All: true})
	if err != nil {
		logf("cleanup: list containers: %v", err)
		return
	}
	var ids []string
	for _, c := range res.Items {
		if ours(c.Labels, c.Names...) {
			ids = append(ids, c.ID)
		}
	}
	if len(ids) > 0 {
		logf("cleanup: removing %d containers", len(ids))
	}
	sem := make(chan struct{}, 10)
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if _, err := b.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true}); err != nil && !strings.Contains(err.Error(), "No such") {
				logf("cleanup: remove container %s: %v", id[:12], err)
			}
		}()
	}
	wg.Wait()
	if nets, err := b.cli.NetworkList(ctx, client.NetworkListOptions{}); err == nil {
		n := 0
		for _, nw := range nets.Items {
			if ours(nw.Labels, nw.Name) {
				if _, err := b.cli.NetworkRemove(ctx, nw.ID, client.NetworkRemoveOptions{}); err != nil {
					logf("cleanup: remove network %s: %v", nw.Name, err)
				} else {
					n++
				}
			}
		}
		if n > 0 {
			logf("cleanup: removed %d networks", n)
		}
	}
	if vols, err := b.cli.VolumeList(ctx, client.VolumeListOptions{}); err == nil {
		for _, v := range vols.Items {
			if ours(v.Labels, v.Name) {
				if _, err := b.cli.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true}); err != nil {
					logf("cleanup: remove volume %s: %v", v.Name, err)
				}
			}
		}
	}
}

// naiveCreate creates (not starts) a container of image publishing
// container port 8080 on 127.0.0.1:hostPort, as compose would for
// `ports: ["127.0.0.1:PORT:8080"]`.
func (b *bench) naiveCreate(ctx context.Context, name, image string, hostPort int) (string, error) {
	port, _ := network.PortFrom(8080, network.TCP)
	res, err := b.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: name,
		Config: &container.Config{
			Image:        image,
			ExposedPorts: network.PortSet{port: struct{}{}},
			Labels:       map[string]string{benchLabel: "1"},
		},
		HostConfig: &container.HostConfig{
			PortBindings: network.PortMap{port: []network.PortBinding{{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: strconv.Itoa(hostPort)}}},
		},
	})
	if err != nil {
		return "", fmt.Errorf("create %s: %w", name, err)
	}
	return res.ID, nil
}

// naiveReplace is what `docker compose up -d` does when a service's image
// changed (compose v2 recreateContainer, then start): create the new
// container under a temporary name, stop the old one (10 s grace, compose's
// default), remove it, rename the new one, start it. Compose does not wait
// for the new container to be ready. The port is free from the old
// container's stop until the new one listens.
func (b *bench) naiveReplace(ctx context.Context, oldID, image string, hostPort int, i int) (string, error) {
	tmp := fmt.Sprintf("%s-tmp-%d", naiveName, i)
	id, err := b.naiveCreate(ctx, tmp, image, hostPort)
	if err != nil {
		return "", err
	}
	grace := 10
	if _, err := b.cli.ContainerStop(ctx, oldID, client.ContainerStopOptions{Timeout: &grace}); err != nil {
		return "", fmt.Errorf("stop: %w", err)
	}
	if _, err := b.cli.ContainerRemove(ctx, oldID, client.ContainerRemoveOptions{}); err != nil {
		return "", fmt.Errorf("remove: %w", err)
	}
	if _, err := b.cli.ContainerRename(ctx, id, client.ContainerRenameOptions{NewName: naiveName}); err != nil {
		return "", fmt.Errorf("rename: %w", err)
	}
	if _, err := b.cli.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		return "", fmt.Errorf("start: %w", err)
	}
	return id, nil
}

// waitHTTP200 polls url every 5 ms until it answers 200; returns when.
func waitHTTP200(ctx context.Context, url, host string, limit time.Duration) (time.Time, error) {
	c := noKeepAliveClient()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		code, _, err := httpGet(ctx, c, url, host)
		if err == nil && code == 200 {
			return time.Now(), nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Time{}, fmt.Errorf("%s (Host %s) did not answer 200 within %s", url, host, limit)
}

func (b *bench) startContainer(ctx context.Context, id string) error {
	_, err := b.cli.ContainerStart(ctx, id, client.ContainerStartOptions{})
	return err
}

func (b *bench) removeContainer(ctx context.Context, id string) error {
	_, err := b.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true})
	return err
}
