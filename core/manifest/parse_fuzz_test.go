package manifest

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/gordon-deploy/docker-gordon/core"
)

// FuzzParseManifest: Parse never panics and returns either a valid,
// normalized spec or a *ManifestError (wrapping core.ErrInvalid) with at
// least one problem; the same input always gives the same answer. The
// committed seed corpus is testdata/fuzz/FuzzParseManifest; the golden
// manifests are added as seeds too.
func FuzzParseManifest(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "manifest", "*.toml"))
	for _, file := range files {
		if data, err := os.ReadFile(file); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(base))
	f.Fuzz(func(t *testing.T, data []byte) {
		spec, err := Parse("fuzz.toml", data)
		_, again := Parse("fuzz.toml", data)
		if (err == nil) != (again == nil) || (err != nil && err.Error() != again.Error()) {
			t.Fatalf("Parse is not deterministic:\n%v\n---\n%v", err, again)
		}
		if err != nil {
			var merr *ManifestError
			if !errors.As(err, &merr) {
				t.Fatalf("error %T is not a *ManifestError: %v", err, err)
			}
			if !errors.Is(err, core.ErrInvalid) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			}
			if len(merr.Problems) == 0 {
				t.Fatal("ManifestError without problems")
			}
			for _, p := range merr.Problems {
				if p.Message == "" || p.Line < 0 || p.Column < 0 {
					t.Fatalf("malformed problem %+v", p)
				}
			}
			return
		}
		checkValidSpec(t, spec)
	})
}

// checkValidSpec asserts the invariants of a spec Parse accepted.
func checkValidSpec(t *testing.T, spec core.AppSpec) {
	t.Helper()
	if !dnsLabelRE.MatchString(spec.Name) {
		t.Fatalf("accepted app name %q", spec.Name)
	}
	if len(spec.Services) == 0 {
		t.Fatal("accepted an app without services")
	}
	if !sort.SliceIsSorted(spec.Services, func(i, j int) bool { return spec.Services[i].Name < spec.Services[j].Name }) {
		t.Fatal("services not sorted")
	}
	hosts := map[string]bool{}
	for _, s := range spec.Services {
		if !dnsLabelRE.MatchString(s.Name) || s.Image == "" {
			t.Fatalf("accepted service %q image %q", s.Name, s.Image)
		}
		for _, h := range s.HTTP {
			if h.Port < 1 || h.Port > 65535 || h.Public() != (h.Host != "") {
				t.Fatalf("accepted http interface %+v", h)
			}
			if h.Host != "" && hosts[h.Host] {
				t.Fatalf("accepted duplicate host %q", h.Host)
			}
			hosts[h.Host] = true
		}
		for _, l4 := range append(append([]core.L4Interface(nil), s.TCP...), s.UDP...) {
			if _, _, ok := parsePublish(l4.Publish); !ok || l4.Port < 1 || l4.Port > 65535 {
				t.Fatalf("accepted l4 interface %+v", l4)
			}
		}
		for _, m := range s.Volumes {
			if checkMountPath(m.Path) != "" || m.Name == "" {
				t.Fatalf("accepted volume %+v", m)
			}
		}
		if s.StopGrace != 0 && (s.StopGrace.D() < minStopGrace || s.StopGrace.D() > maxStopGrace) {
			t.Fatalf("accepted stop_grace %s", s.StopGrace)
		}
	}
}
