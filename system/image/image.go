// Package image builds the images of docker gordon's system containers
// (the edge proxy and the reconcile loop) locally, FROM scratch, from the
// installed static binaries, so they need no registry (ARCHITECTURE §1).
//
// The build context is made in Go: a Dockerfile and a rootfs.tar that ADD
// unpacks (keeping modes), holding every binary at its path in the image and
// an empty /tmp (mode 1777). It is sent to the engine's classic builder,
// which works against Engine API 1.41 (Docker 20.10) and newer.
//
// Images are tagged gordon-system/<name>:<hash>, the hash (first 16 hex
// digits of a SHA-256) covering the Dockerfile, the image paths and the
// binaries' contents; a build is skipped when that tag already exists.
package image

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/api/types/jsonstream"
	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Repo is the repository prefix of every system image.
const Repo = "gordon-system/"

// Client is the part of the Engine API client Build uses. Both
// *client.Client and the docker CLI's client.APIClient satisfy it.
type Client interface {
	ImageInspect(ctx context.Context, image string, opts ...client.ImageInspectOption) (client.ImageInspectResult, error)
	ImageBuild(ctx context.Context, buildContext io.Reader, options client.ImageBuildOptions) (client.ImageBuildResult, error)
}

// Image is the result of Build.
type Image struct {
	// ID is the engine's image ID ("sha256:…").
	ID string
	// Ref is the tag, gordon-system/<name>:<hash>.
	Ref string
	// Hash is the content hash in the tag (16 hex digits).
	Hash string
	// Built is false when the tag already existed and nothing was built.
	Built bool
}

// Build builds (or finds) the system image gordon-system/<name>:<hash>.
//
// binaries maps an absolute path in the image (e.g. "/gordon-edge") to the
// host path of a static executable; each is stored with mode 0755. When
// exactly one binary is given it becomes the ENTRYPOINT; otherwise the image
// has none and containers must set one. labels are set on the image.
//
// Errors: a bad name or path, or an unreadable binary → core.ErrInvalid; an
// unreachable engine → core.ErrUnavailable; a failed build → the builder's
// message wrapped with the image reference.
func Build(ctx context.Context, cli Client, name string, binaries map[string]string, labels map[string]string) (Image, error) {
	if err := checkName(name); err != nil {
		return Image{}, err
	}
	if len(binaries) == 0 {
		return Image{}, fmt.Errorf("system image %s: no binaries: %w", name, core.ErrInvalid)
	}
	paths := slices.Sorted(maps.Keys(binaries))
	for _, p := range paths {
		if !path.IsAbs(p) || path.Clean(p) != p || p == "/" || p == "/tmp" || strings.HasPrefix(p, "/tmp/") {
			return Image{}, fmt.Errorf("system image %s: bad image path %q (absolute, clean, not under /tmp): %w", name, p, core.ErrInvalid)
		}
	}
	for _, p := range paths {
		if err := checkStatic(binaries[p]); err != nil {
			return Image{}, fmt.Errorf("system image %s: %w", name, err)
		}
	}
	df := dockerfile(name, paths)
	hash, err := contentHash(df, paths, binaries)
	if err != nil {
		return Image{}, fmt.Errorf("system image %s: %w", name, err)
	}
	img := Image{Ref: Repo + name + ":" + hash, Hash: hash}

	if res, err := cli.ImageInspect(ctx, img.Ref); err == nil {
		img.ID = res.ID
		return img, nil
	} else if !cerrdefs.IsNotFound(err) {
		return Image{}, fmt.Errorf("system image %s: inspect: %w: %w", img.Ref, core.ErrUnavailable, err)
	}

	rootfs, err := os.CreateTemp("", "gordon-sysimage-*.tar")
	if err != nil {
		return Image{}, fmt.Errorf("system image %s: %w", img.Ref, err)
	}
	defer os.Remove(rootfs.Name())
	defer rootfs.Close()
	if err := writeRootfs(rootfs, paths, binaries); err != nil {
		return Image{}, fmt.Errorf("system image %s: %w", img.Ref, err)
	}

	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeContext(pw, df, rootfs)) }()
	res, err := cli.ImageBuild(ctx, pr, client.ImageBuildOptions{
		Tags:        []string{img.Ref},
		Remove:      true,
		ForceRemove: true,
		Version:     build.BuilderV1,
		Labels:      labels,
	})
	if err != nil {
		pr.CloseWithError(err)
		return Image{}, fmt.Errorf("system image %s: build: %w: %w", img.Ref, core.ErrUnavailable, err)
	}
	err = DrainBuild(res.Body)
	res.Body.Close()
	pr.Close()
	if err != nil {
		return Image{}, fmt.Errorf("system image %s: build: %w", img.Ref, err)
	}
	got, err := cli.ImageInspect(ctx, img.Ref)
	if err != nil {
		return Image{}, fmt.Errorf("system image %s: inspect after build: %w", img.Ref, err)
	}
	img.ID = got.ID
	img.Built = true
	return img, nil
}

// checkName accepts a lowercase repository path component.
func checkName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("system image name %q: 1..64 characters: %w", name, core.ErrInvalid)
	}
	for i, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || (i > 0 && (r == '-' || r == '_' || r == '.'))
		if !ok {
			return fmt.Errorf("system image name %q: only a-z, 0-9, '-', '_', '.' (not first): %w", name, core.ErrInvalid)
		}
	}
	return nil
}

func dockerfile(name string, paths []string) string {
	var b strings.Builder
	b.WriteString("FROM scratch\nADD rootfs.tar /\n")
	fmt.Fprintf(&b, "LABEL dev.gordon.system-image=%s\n", name)
	if len(paths) == 1 {
		ep, _ := json.Marshal([]string{paths[0]})
		fmt.Fprintf(&b, "ENTRYPOINT %s\n", ep)
	}
	return b.String()
}

// contentHash hashes the Dockerfile, then each image path and its binary.
func contentHash(df string, paths []string, binaries map[string]string) (string, error) {
	h := sha256.New()
	io.WriteString(h, df)
	for _, p := range paths {
		fmt.Fprintf(h, "\x00%s\x00", p)
		f, err := os.Open(binaries[p])
		if err != nil {
			return "", fmt.Errorf("read binary for %s: %w: %w", p, core.ErrInvalid, err)
		}
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", fmt.Errorf("read binary %s: %w", binaries[p], err)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// writeRootfs writes the image filesystem: /tmp (1777), the parent
// directories of the binaries (0755), the binaries (0755).
func writeRootfs(f *os.File, paths []string, binaries map[string]string) error {
	tw := tar.NewWriter(f)
	epoch := time.Unix(0, 0)
	if err := tw.WriteHeader(&tar.Header{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777, ModTime: epoch}); err != nil {
		return err
	}
	dirs := map[string]bool{}
	for _, p := range paths {
		for d := path.Dir(p); d != "/" && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(d, "/") + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: epoch}); err != nil {
			return err
		}
	}
	for _, p := range paths {
		if err := addFile(tw, strings.TrimPrefix(p, "/"), binaries[p], epoch); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	_, err := f.Seek(0, io.SeekStart)
	return err
}

func addFile(tw *tar.Writer, name, hostPath string, mtime time.Time) error {
	f, err := os.Open(hostPath)
	if err != nil {
		return fmt.Errorf("%w: %w", core.ErrInvalid, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("binary %s is not a regular file: %w", hostPath, core.ErrInvalid)
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o755, Size: fi.Size(), ModTime: mtime}); err != nil {
		return err
	}
	n, err := io.Copy(tw, f)
	if err != nil {
		return err
	}
	if n != fi.Size() {
		return fmt.Errorf("binary %s changed while being read", hostPath)
	}
	return nil
}

// writeContext streams the build context: Dockerfile, then rootfs.tar.
func writeContext(w io.Writer, df string, rootfs *os.File) error {
	fi, err := rootfs.Stat()
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	epoch := time.Unix(0, 0)
	if err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(df)), ModTime: epoch}); err != nil {
		return err
	}
	if _, err := io.WriteString(tw, df); err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: "rootfs.tar", Mode: 0o644, Size: fi.Size(), ModTime: epoch}); err != nil {
		return err
	}
	if _, err := io.Copy(tw, rootfs); err != nil {
		return err
	}
	return tw.Close()
}

// DrainBuild reads an image build's JSON message stream (ImageBuild's body)
// to its end and returns the first error it reports, with the last 20 lines
// of build output. Shared with test/testimages.
func DrainBuild(r io.Reader) error {
	dec := json.NewDecoder(r)
	var tail []string
	for {
		var m jsonstream.Message
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if m.Stream != "" {
			tail = append(tail, strings.TrimRight(m.Stream, "\n"))
			if len(tail) > 20 {
				tail = tail[1:]
			}
		}
		if m.Error != nil {
			return fmt.Errorf("%s\n%s", m.Error.Message, strings.Join(tail, "\n"))
		}
	}
}

// checkStatic refuses an executable that cannot run in a FROM-scratch
// image (StaticLinuxExecutable; the container would only fail with "exec
// …: no such file or directory"). Files that are not ELF are left to the
// engine. Errors wrap core.ErrInvalid.
func checkStatic(file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("read binary %s: %w: %w", file, core.ErrInvalid, err)
	}
	if !bytes.HasPrefix(data, []byte(elf.ELFMAG)) {
		return nil // not ELF
	}
	if why := StaticLinuxExecutable(data, ""); why != "" {
		return fmt.Errorf("%s cannot run in a FROM-scratch image: %s, as make build and install.sh do: %w", file, why, core.ErrInvalid)
	}
	return nil
}

// StaticLinuxExecutable returns "" for a statically linked Linux ELF
// executable for arch (the engine's, "x86_64" or "aarch64"), else why not.
func StaticLinuxExecutable(data []byte, arch string) string {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return "not an ELF executable"
	}
	defer f.Close()
	if f.OSABI != elf.ELFOSABI_NONE && f.OSABI != elf.ELFOSABI_LINUX {
		return "not a Linux executable"
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return "dynamically linked (build it with CGO_ENABLED=0)"
		}
	}
	want := map[string]elf.Machine{"x86_64": elf.EM_X86_64, "amd64": elf.EM_X86_64, "aarch64": elf.EM_AARCH64, "arm64": elf.EM_AARCH64}
	if m, ok := want[arch]; ok && f.Machine != m {
		return fmt.Sprintf("built for %s, the engine runs %s", f.Machine, arch)
	}
	return ""
}
