// Package testimages builds the test workloads (test/workloads/<name>) into
// local Docker images FROM scratch, for the runtime tests, test/e2e and
// `make demo`. No registry is involved: binaries are compiled statically
// (CGO_ENABLED=0) and sent to the engine's classic builder with a tar
// context made in Go, which works against Engine API 1.41 (Docker 20.10)
// and newer.
//
// Each image holds /<name> (the entrypoint) and an empty /tmp (mode 1777),
// and bakes ENV VERSION=<version>. It is tagged gordon-test/<name>:c-<hash>,
// the hash covering the binary and the Dockerfile (so the version too), and,
// when a version is given, gordon-test/<name>:<version>. A build is skipped
// when the hash tag already exists.
package testimages

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/system/image"
)

// Repo is the repository prefix of every test image.
const Repo = "gordon-test/"

// Names lists the workloads that can be built.
var Names = []string{"httpd", "tcpecho", "kv", "grpcd", "sigd", "voldb"}

// extraDockerfile holds per-workload Dockerfile lines: sigd has a
// HEALTHCHECK (every 1 s, 2 retries); voldb declares a VOLUME and a
// STOPSIGNAL like a database image.
var extraDockerfile = map[string]string{
	"sigd":  "HEALTHCHECK --interval=1s --timeout=2s --retries=2 CMD [\"/sigd\", \"health\"]\n",
	"voldb": "VOLUME /data\nSTOPSIGNAL SIGQUIT\n",
}

// DefaultVersion is baked in when Build gets no version.
const DefaultVersion = "dev"

// Build builds the named workloads (all of Names when none is given) with
// VERSION=dev and returns name → image reference (gordon-test/<name>:c-<hash>).
// Errors: an unknown name, a failed compile, an unreachable engine or a
// failed image build.
func Build(ctx context.Context, names ...string) (map[string]string, error) {
	return BuildVersion(ctx, "", names...)
}

// BuildVersion is Build with ENV VERSION=version baked into the images, which
// are also tagged gordon-test/<name>:<version>; the returned references are
// those version tags. An empty version means DefaultVersion and no extra tag.
func BuildVersion(ctx context.Context, version string, names ...string) (map[string]string, error) {
	if len(names) == 0 {
		names = Names
	}
	for _, n := range names {
		if !slices.Contains(Names, n) {
			return nil, fmt.Errorf("testimages: unknown workload %q (known: %s)", n, strings.Join(Names, ", "))
		}
	}
	baked := version
	if baked == "" {
		baked = DefaultVersion
	}
	if strings.ContainsAny(baked, " \"\\\n") {
		return nil, fmt.Errorf("testimages: bad version %q", version)
	}

	cli, err := client.New(client.FromEnv)
	if err != nil {
		return nil, fmt.Errorf("testimages: docker client: %w", err)
	}
	defer cli.Close()

	// Within one process, images built before are reused without
	// recompiling as long as their tag still exists.
	if out := remembered(ctx, cli, version, names); out != nil {
		return out, nil
	}

	bin, err := os.MkdirTemp("", "gordon-testimages-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(bin)
	if err := compile(ctx, bin, names); err != nil {
		return nil, err
	}

	out := make(map[string]string, len(names))
	for _, n := range names {
		ref, err := buildOne(ctx, cli, bin, n, baked, version)
		if err != nil {
			return nil, err
		}
		out[n] = ref
		memo.Store(version+"/"+n, ref)
	}
	return out, nil
}

// memo maps "version/name" to the reference built in this process.
var memo sync.Map

// remembered returns the memoized references of names when all of them are
// known and still present in the engine, else nil.
func remembered(ctx context.Context, cli *client.Client, version string, names []string) map[string]string {
	out := make(map[string]string, len(names))
	for _, n := range names {
		v, ok := memo.Load(version + "/" + n)
		if !ok {
			return nil
		}
		if _, err := cli.ImageInspect(ctx, v.(string)); err != nil {
			return nil
		}
		out[n] = v.(string)
	}
	return out
}

// Require is BuildVersion for tests: it skips t when the Docker engine does
// not answer and fails t when a build fails.
func Require(t testing.TB, version string, names ...string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := Available(ctx); err != nil {
		t.Skipf("Docker engine not available (%v); these tests need a running engine: `docker info`", err)
	}
	refs, err := BuildVersion(ctx, version, names...)
	if err != nil {
		t.Fatalf("build test images: %v", err)
	}
	return refs
}

// Available pings the engine named by the environment (DOCKER_HOST…).
func Available(ctx context.Context) error {
	cli, err := client.New(client.FromEnv)
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
	return err
}

// workloadsDir is test/workloads next to this package's source.
func workloadsDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("testimages: cannot locate source directory")
	}
	dir := filepath.Join(filepath.Dir(file), "..", "workloads")
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("testimages: workloads source: %w", err)
	}
	return dir, nil
}

// Compile builds static Linux binaries of the named workloads into
// dir/<name> (for a test that builds its own image from them). Errors: an
// unknown name or a failed compile.
func Compile(ctx context.Context, dir string, names ...string) error {
	for _, n := range names {
		if !slices.Contains(Names, n) {
			return fmt.Errorf("testimages: unknown workload %q (known: %s)", n, strings.Join(Names, ", "))
		}
	}
	return compile(ctx, dir, names)
}

// compile builds static linux binaries of names into dir/<name>.
func compile(ctx context.Context, dir string, names []string) error {
	src, err := workloadsDir()
	if err != nil {
		return err
	}
	// go test and go run put their own toolchain first on PATH.
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("build test workloads: the go command is not on PATH: %w", err)
	}
	args := []string{"build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", dir + string(filepath.Separator)}
	for _, n := range names {
		args = append(args, "./"+n)
	}
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("testimages: go build %s: %w\n%s", strings.Join(names, " "), err, out)
	}
	return nil
}

func dockerfile(name, version string) string {
	return fmt.Sprintf("FROM scratch\nADD rootfs.tar /\nENV VERSION=%s\nLABEL dev.gordon.test-image=%s\n%sENTRYPOINT [\"/%s\"]\n", version, name, extraDockerfile[name], name)
}

// buildOne builds (or finds) gordon-test/<name>:c-<hash> and returns its
// reference, or the version tag when tagVersion is set.
func buildOne(ctx context.Context, cli *client.Client, binDir, name, baked, tagVersion string) (string, error) {
	binary, err := os.ReadFile(filepath.Join(binDir, name))
	if err != nil {
		return "", fmt.Errorf("testimages: read %s binary: %w", name, err)
	}
	df := dockerfile(name, baked)
	h := sha256.New()
	h.Write([]byte(df))
	h.Write(binary)
	hashRef := Repo + name + ":c-" + hex.EncodeToString(h.Sum(nil))[:12]

	if _, err := cli.ImageInspect(ctx, hashRef); err != nil {
		if !cerrdefs.IsNotFound(err) {
			return "", fmt.Errorf("testimages: inspect %s: %w", hashRef, err)
		}
		buildCtx, err := contextTar(name, df, binary)
		if err != nil {
			return "", err
		}
		res, err := cli.ImageBuild(ctx, bytes.NewReader(buildCtx), client.ImageBuildOptions{
			Tags:        []string{hashRef},
			Remove:      true,
			ForceRemove: true,
			Version:     build.BuilderV1,
			Labels:      map[string]string{"dev.gordon.test-image": name},
		})
		if err != nil {
			return "", fmt.Errorf("testimages: build %s: %w", hashRef, err)
		}
		err = image.DrainBuild(res.Body)
		res.Body.Close()
		if err != nil {
			return "", fmt.Errorf("testimages: build %s: %w", hashRef, err)
		}
	}
	if tagVersion == "" {
		return hashRef, nil
	}
	verRef := Repo + name + ":" + tagVersion
	if _, err := cli.ImageTag(ctx, client.ImageTagOptions{Source: hashRef, Target: verRef}); err != nil {
		return "", fmt.Errorf("testimages: tag %s as %s: %w", hashRef, verRef, err)
	}
	return verRef, nil
}

// contextTar is the build context: Dockerfile and rootfs.tar (which ADD
// unpacks, keeping modes: /tmp 1777 and /<name> 0755).
func contextTar(name, df string, binary []byte) ([]byte, error) {
	var rootfs bytes.Buffer
	tw := tar.NewWriter(&rootfs)
	epoch := time.Unix(0, 0)
	entries := []struct {
		hdr  tar.Header
		body []byte
	}{
		{tar.Header{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777, ModTime: epoch}, nil},
		{tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(binary)), ModTime: epoch}, binary},
	}
	for _, e := range entries {
		if err := tw.WriteHeader(&e.hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}

	var out bytes.Buffer
	cw := tar.NewWriter(&out)
	for _, f := range []struct {
		name string
		body []byte
	}{{"Dockerfile", []byte(df)}, {"rootfs.tar", rootfs.Bytes()}} {
		if err := cw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), ModTime: epoch}); err != nil {
			return nil, err
		}
		if _, err := cw.Write(f.body); err != nil {
			return nil, err
		}
	}
	if err := cw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
