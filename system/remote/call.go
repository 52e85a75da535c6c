package remote

// The client's side of a remote verb: what it sends the runner (the
// bundle, the command line, the images to check or ship) and the run.

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/docker/cli/cli/command"
	"github.com/docker/cli/cli/config/configfile"
	"github.com/docker/cli/cli/config/credentials"
	"github.com/hashicorp/go-hclog"
	"github.com/moby/moby/client"
	"github.com/spf13/pflag"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/composeapi"
	"github.com/gordon-deploy/docker-gordon/system/image"
)

// Call is a verb prepared for the runner: what goes over its stdin, its
// command line, and the images to check (and with CopyImages send) on
// the target engine before it starts.
type Call struct {
	Bundle     Bundle
	Args       []string
	Images     []string
	ShipImages bool
	CopyImages bool
}

// ServerPathsFor is ReadServerPaths; on this machine's engine (a swarm
// manager: t is not Remote) the state directory and socket are this
// CLI's.
func ServerPathsFor(ctx context.Context, api client.APIClient, t Target, stateDir string) (ServerPaths, error) {
	paths, err := ReadServerPaths(ctx, api)
	if err != nil {
		return paths, err
	}
	if !t.Remote {
		paths.StateDir, paths.Socket = stateDir, strings.TrimPrefix(t.Host, "unix://")
	}
	return paths, nil
}

// Dispatch runs c in a runner container on the engine api reaches (t,
// paths): it checks (and with c.CopyImages sends) c's images, builds the
// runner image once per version (with the gordon-edge binary edgeBinary,
// "" for none) and runs it, streaming its output to s. It returns the
// runner's exit code. --copy-images towards a swarm manager is
// core.ErrInvalid and changes nothing.
func Dispatch(ctx context.Context, s Streams, api client.APIClient, t Target, paths ServerPaths, c Call, registryAuth func(ref string) string, edgeBinary string) (int, error) {
	t0 := time.Now()
	if paths.Network != "" && c.CopyImages {
		return 0, fmt.Errorf("--copy-images: %s is a swarm manager and every node pulls an instance's image by digest from a registry; an image sent to the manager alone reaches no other node: push it to a registry the nodes can pull from; nothing was changed: %w", t, core.ErrInvalid)
	}
	if c.ShipImages && paths.Network == "" {
		if err := ShipImages(ctx, s.Err, api, t, c.Images, c.CopyImages, registryAuth); err != nil {
			return 0, err
		}
	}
	img, err := RunnerImage(ctx, api, edgeBinary)
	if err != nil {
		return 0, fmt.Errorf("runner image on %s: %w", t, err)
	}
	if img.Built {
		fmt.Fprintf(s.Err, "built the runner image %s on %s in %s (once per version)\n", img.Ref, t.Context, time.Since(t0).Round(time.Millisecond))
		PruneRunnerImages(ctx, api, img.ID)
	}
	log := s.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	log.Debug("runner", "image", img.Ref, "args", c.Args, "state_dir", paths.StateDir, "socket", paths.Socket)
	code, err := Run(ctx, s, api, t, img.Ref, paths, c.Args, c.Bundle)
	log.Debug("runner finished", "exit", code, "elapsed", time.Since(t0))
	return code, err
}

// RunnerArgs rebuilds the verb's command line for the runner from what
// the CLI parsed: the verb path below "gordon", every flag of fs the user
// set (repeatable flags once per value) except those the client consumes
// (drop) or rewrites (extra), then the positional arguments.
func RunnerArgs(verbPath []string, fs *pflag.FlagSet, args []string, drop map[string]bool, extra []string) []string {
	out := append([]string{"gordon"}, verbPath...)
	fs.Visit(func(f *pflag.Flag) {
		if drop[f.Name] {
			return
		}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			for _, v := range sv.GetSlice() {
				out = append(out, "--"+f.Name+"="+v)
			}
			return
		}
		out = append(out, "--"+f.Name+"="+f.Value.String())
	})
	out = append(out, extra...)
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			out = append(out, "--")
			break
		}
	}
	return append(out, args...)
}

// ClientRegistryAuth resolves from cfg (docker login, credential
// helpers) the credentials the runner may need, by registry host: for
// images when the verb names some, else for every registry cfg has
// credentials for (the verb may pull any pinned image again).
func ClientRegistryAuth(cfg *configfile.ConfigFile, images []string, log hclog.Logger) map[string]string {
	out := map[string]string{}
	if images != nil {
		for _, img := range images {
			host := RegistryHost(img)
			if host == "" || out[host] != "" {
				continue
			}
			ac, err := cfg.GetAuthConfig(host)
			if err != nil || (ac.Username == "" && ac.IdentityToken == "" && ac.RegistryToken == "" && ac.Auth == "") {
				continue
			}
			if tok, err := command.RetrieveAuthTokenFromImage(cfg, img); err == nil {
				out[host] = tok
			}
		}
		return out
	}
	all, err := cfg.GetAllCredentials()
	if err != nil {
		if log != nil {
			log.Warn("registry credentials unavailable", "error", err)
		}
		return out
	}
	for key := range all {
		host := credentials.ConvertToHostname(key)
		if host == "index.docker.io" {
			host = "docker.io"
		}
		if tok, err := command.RetrieveAuthTokenFromImage(cfg, host+"/x"); err == nil {
			out[host] = tok
		}
	}
	return out
}

// ClientFileFlags are the flags that name a file of the client's machine
// (edge start / system start --acme-ca-root, certs add --cert and --key):
// a remote verb reads the file here and the runner gets its copy, like the
// other inputs.
var ClientFileFlags = []string{"acme-ca-root", "cert", "key"}

// ShipFlagFiles reads the file of each ClientFileFlags flag given in fs
// with read (the CLI's system.ReadCertFile), adds it to b under
// flagfiles/<flag>/ and gives the runner the flag with that copy's path
// instead (drop, extra). An unreadable file is refused here (ErrInvalid
// naming the verb and the flag), before the engine is touched.
func ShipFlagFiles(fs *pflag.FlagSet, verb string, b *Bundle, drop map[string]bool, extra *[]string, read func(flag, path string) ([]byte, error)) error {
	for _, name := range ClientFileFlags {
		fl := fs.Lookup(name)
		if fl == nil || !fl.Changed || fl.Value.String() == "" {
			continue
		}
		path := fl.Value.String()
		data, err := read(name, path)
		if err != nil {
			return fmt.Errorf("%s: %w; nothing was changed", verb, err)
		}
		rel := "flagfiles/" + name + "/" + filepath.Base(path)
		b.Files = append(b.Files, File{Path: rel, Mode: 0o600, Data: data})
		drop[name] = true
		*extra = append(*extra, "--"+name+"="+RunnerInputDir+"/"+rel)
	}
	return nil
}

// BundlePlugins adds the custom plugins (gordon-<kind>-<name>) of dirs
// that are static Linux executables for arch to b; others are named on
// warn and left out (they could not run on the server). It returns how
// many it added.
func BundlePlugins(b *Bundle, dirs []string, arch string, warn io.Writer) (int, error) {
	n := 0
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return n, fmt.Errorf("--plugin-dir %s: %w", dir, err)
		}
		for _, ent := range entries {
			if ent.IsDir() || !strings.HasPrefix(ent.Name(), "gordon-") {
				continue
			}
			full := filepath.Join(dir, ent.Name())
			fi, err := os.Stat(full)
			if err != nil || fi.Mode().Perm()&0o111 == 0 {
				continue
			}
			data, err := os.ReadFile(full)
			if err != nil {
				return n, fmt.Errorf("plugin %s: %w", full, err)
			}
			if why := image.StaticLinuxExecutable(data, arch); why != "" {
				fmt.Fprintf(warn, "warning: plugin %s is not sent to the engine: %s (only static Linux executables run in the runner)\n", full, why)
				continue
			}
			b.Files = append(b.Files, File{Path: "plugins/" + ent.Name(), Mode: 0o755, Data: data})
			n++
		}
	}
	return n, nil
}

// SpecImages lists the images an app's services name, in service order
// (duplicates kept; ShipImages skips repeats).
func SpecImages(spec core.AppSpec) []string {
	images := make([]string, 0, len(spec.Services))
	for _, s := range spec.Services {
		images = append(images, s.Image)
	}
	return images
}

// ServingContainer asks a runner on the engine api reaches (t) which
// container serves instance (from 1) of app's service: the journal lives
// there. The runner's stderr goes to s.Err; code is its exit status when
// not 0 (it has said why).
func ServingContainer(ctx context.Context, s Streams, api client.APIClient, t Target, app, service string, instance int, edgeBinary string) (id string, code int, err error) {
	paths, err := ReadServerPaths(ctx, api)
	if err != nil {
		return "", 0, err
	}
	img, err := RunnerImage(ctx, api, edgeBinary)
	if err != nil {
		return "", 0, fmt.Errorf("runner image on %s: %w", t, err)
	}
	var out strings.Builder
	s.Out = &out
	args := []string{"gordon", "exec", "--print-container", fmt.Sprintf("--instance=%d", instance), app, service, "--", "true"}
	if code, err = Run(ctx, s, api, t, img.Ref, paths, args, Bundle{}); err != nil || code != 0 {
		return "", code, err
	}
	id = strings.TrimSpace(out.String())
	if id == "" || strings.ContainsAny(id, " \n") {
		return "", 0, fmt.Errorf("exec %s %s: the runner on %s named no serving container (it said %q)", app, service, t, id)
	}
	return id, 0, nil
}

// SecretValues reads the compose secrets with a file: or environment:
// source (their values; an unreadable source is an error).
func SecretValues(secrets []composeapi.Secret) ([]SecretValue, error) {
	values := make([]SecretValue, 0, len(secrets))
	for _, s := range secrets {
		v, err := s.Value()
		if err != nil {
			return nil, err
		}
		values = append(values, SecretValue{Service: s.Service, Name: s.Name, Value: v})
	}
	return values, nil
}
