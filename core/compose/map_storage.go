package compose

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/gordon-deploy/docker-gordon/core/composeapi"
)

// volumes: named volume → [[volume]], bind → approved [[bind]].
func (m *mapper) volumes(name string, svc *types.ServiceConfig, out *service) {
	base := "services." + name + ".volumes"
	for i, v := range svc.Volumes {
		key := m.writtenKey(fmt.Sprintf("%s[%d]", base, i), base)
		switch v.Type {
		case types.VolumeTypeVolume:
			if v.Source == "" {
				m.refuse(key, "anonymous volume at %s cannot be honoured: it would be a new empty volume for every generation; name it (NAME:%s, declared under top-level volumes:)", v.Target, v.Target)
				continue
			}
			if v.Volume != nil && (v.Volume.NoCopy || v.Volume.Subpath != "") {
				m.refuse(key, "volume options (nocopy, subpath) are not supported yet; remove them")
			}
			out.Volume = append(out.Volume, mount{Name: v.Source, Path: v.Target, ReadOnly: v.ReadOnly})
			m.from(fmt.Sprintf("services.%s.volume[%d]", name, len(out.Volume)-1), key)
		case types.VolumeTypeBind:
			if v.Bind != nil && (v.Bind.Propagation != "" || v.Bind.SELinux != "" || v.Bind.Recursive != "") {
				m.refuse(key, "bind options (propagation, selinux, recursive) are not supported yet; remove them")
			}
			m.bind(name, key, v, out)
		case types.VolumeTypeTmpfs:
			out.Tmpfs = append(out.Tmpfs, tmpfsOf(v))
			m.from("services."+name+".tmpfs", key)
		default:
			m.refuse(key, "a %s mount cannot be honoured: use a named volume or an approved bind", v.Type)
		}
	}
}

// bind maps one bind mount: a host path the operator approved becomes
// a [[bind]]; else a path inside the project directory is a project file
// shipped with the deploy (SPEC R82, projectFile); else it is refused
// with how to approve it.
func (m *mapper) bind(name, key string, v types.ServiceVolumeConfig, out *service) {
	src := path.Clean(v.Source)
	var policyErr error
	if m.o.BindName != nil {
		bn, err := m.o.BindName(src)
		if err == nil {
			out.Bind = append(out.Bind, mount{Name: bn, Path: v.Target, ReadOnly: v.ReadOnly})
			m.from(fmt.Sprintf("services.%s.bind[%d]", name, len(out.Bind)-1), key)
			return
		}
		policyErr = err
	}
	if rel, inside := m.inProject(src); inside {
		if m.projectFile(key, src, v.Target, 0, !v.ReadOnly, out) {
			m.from(fmt.Sprintf("services.%s.config[%d]", name, len(out.Config)-1), key)
			if !v.ReadOnly {
				m.note("%s: ./%s is shipped read-only with the deploy at %s (compose would bind the live file, writable): a change to it deploys the service again", name, rel, v.Target)
			}
		}
		return
	}
	if policyErr == nil {
		m.refuse(key, "bind %s cannot be honoured: no bind policy is available", m.shown(src))
		return
	}
	m.refuse(key, "bind %s → %s: %v", m.shown(src), v.Target, policyErr)
}

// secretsOf: a service secret → a file secret at /run/secrets/TARGET.
func (m *mapper) secretsOf(name string, svc *types.ServiceConfig, out *service) {
	base := "services." + name + ".secrets"
	for i, s := range svc.Secrets {
		key := m.writtenKey(fmt.Sprintf("%s[%d]", base, i), base)
		target := s.Target
		if target == "" {
			target = s.Source
		}
		if strings.HasPrefix(target, "/") {
			dir, file := path.Split(path.Clean(target))
			if dir != "/run/secrets/" {
				m.refuse(key, "secret target %s cannot be honoured: secrets are mounted at /run/secrets/NAME; give target: NAME", target)
				continue
			}
			target = file
		}
		if s.UID != "" || s.GID != "" || s.Mode != nil {
			m.refuse(key, "secret uid, gid and mode are not supported yet: the file is mounted read-only, owned by root; remove them")
		}
		def, ok := m.p.Secrets[s.Source]
		if !ok {
			m.refuse(key, "secret %s is not declared under top-level secrets:", s.Source)
			continue
		}
		if out.Secrets == nil {
			out.Secrets = map[string]secretRef{}
		}
		out.Secrets[target] = secretRef{Name: s.Source, As: "file"}
		m.from("services."+name+".secrets."+target, key)
		switch {
		case bool(def.External):
			m.note("%s: secret %s is external: set it with docker gordon secrets set %s %s %s", name, s.Source, m.p.Name, name, s.Source)
		case def.File != "":
			m.secrets = append(m.secrets, Secret{Service: name, Name: s.Source, File: def.File})
		case def.Environment != "":
			m.secrets = append(m.secrets, composeapi.EnvSecret(name, s.Source, def.Environment, m.p.Environment))
		default:
			m.refuse("secrets."+s.Source, "secret %s has no source: give file: PATH, environment: VAR or external: true", s.Source)
		}
	}
}

// devices: HOST:CONTAINER with the same path and default permissions.
func (m *mapper) devices(name string, svc *types.ServiceConfig, out *service) {
	for i, d := range svc.Devices {
		key := m.writtenKey(fmt.Sprintf("services.%s.devices[%d]", name, i), "services."+name+".devices")
		if d.Target != "" && d.Target != d.Source || d.Permissions != "" && d.Permissions != "rwm" {
			m.refuse(key, "device %s:%s:%s cannot be honoured: a device is mounted at its host path with rwm; write %s", d.Source, d.Target, d.Permissions, d.Source)
			continue
		}
		out.Devices = append(out.Devices, d.Source)
		m.from(fmt.Sprintf("services.%s.devices[%d]", name, len(out.Devices)-1), key)
	}
}

// shown writes a host path under the project directory as the user did
// ("./public"), any other as it is.
func (m *mapper) shown(p string) string {
	if rel, err := filepath.Rel(m.p.WorkingDir, p); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel) {
		return "./" + rel
	}
	return p
}
