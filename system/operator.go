package system

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pelletier/go-toml/v2"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/privilege"
	"github.com/gordon-deploy/docker-gordon/core/retention"
)

// OperatorConfig is <state>/config.toml, which only the operator writes:
// the approved binds, the privileges approved per app, the retention of
// ops and revisions (docs/security.md "The approvals in config.toml").
type OperatorConfig struct {
	Binds      map[string]string               `toml:"binds"`
	Privileges map[string]privilege.Privileges `toml:"privileges"`
	Retention  RetentionConfig                 `toml:"retention"`
}

// RetentionConfig is [retention]: how many ops and revisions each app
// keeps (nil: the default; 0: all).
type RetentionConfig struct {
	Ops       *int `toml:"ops"`
	Revisions *int `toml:"revisions"`
}

// ReadOperatorConfig reads <state>/config.toml (absent: the empty config)
// and returns it with its path.
func ReadOperatorConfig(stateDir string) (OperatorConfig, string, error) {
	path := filepath.Join(stateDir, "config.toml")
	var cfg OperatorConfig
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return cfg, path, nil
	}
	if err != nil {
		return cfg, path, err
	}
	if err := toml.Unmarshal(data, &cfg); err != nil {
		return cfg, path, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, path, nil
}

// Retention is [retention] of <state>/config.toml: how many ops and
// revisions each app keeps, with the defaults (retention.DefaultOps,
// retention.DefaultRevisions) for what it does not set; an unreadable
// file gives the defaults (the bind and privilege checks report it).
func Retention(stateDir string) (ops, revisions int) {
	ops, revisions = retention.DefaultOps, retention.DefaultRevisions
	cfg, _, err := ReadOperatorConfig(stateDir)
	if err != nil {
		return ops, revisions
	}
	if cfg.Retention.Ops != nil {
		ops = *cfg.Retention.Ops
	}
	if cfg.Retention.Revisions != nil {
		revisions = *cfg.Retention.Revisions
	}
	return ops, revisions
}

// BindPath looks up an operator-approved host path for a bind name in
// <state>/config.toml:
//
//	[binds]
//	config = "/srv/blog/config"
//
// A bind name that is not approved is refused with what to add.
func BindPath(stateDir, name string) (string, error) {
	cfg, path, err := ReadOperatorConfig(stateDir)
	if err != nil {
		return "", err
	}
	p, ok := cfg.Binds[name]
	if !ok || p == "" {
		return "", fmt.Errorf("bind %q is not approved: add %s = \"/host/path\" under [binds] in %s", name, name, path)
	}
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("%s: binds.%s = %q: want an absolute host path", path, name, p)
	}
	return p, nil
}

// PrivilegePolicy refuses the options of service svc of app that go
// beyond Docker's defaults (capabilities outside its default set, host
// devices) unless [privileges.<app>] of <state>/config.toml approves them;
// the refusal names the line to set (privilege.Refusal).
func PrivilegePolicy(stateDir, app string, svc *core.ServiceSpec) error {
	if caps, devices := (privilege.Privileges{}).Unapproved(svc); len(caps) == 0 && len(devices) == 0 {
		return nil // nothing to approve: config.toml is not read
	}
	cfg, path, err := ReadOperatorConfig(stateDir)
	if err != nil {
		return err
	}
	return privilege.Refusal(app, path, cfg.Privileges[app], svc)
}

// CheckPrivileges is PrivilegePolicy for every service of spec: the
// refusals of all of them, joined.
func CheckPrivileges(stateDir string, spec core.AppSpec) error {
	var errs []error
	for i := range spec.Services {
		if err := PrivilegePolicy(stateDir, spec.Name, &spec.Services[i]); err != nil {
			errs = append(errs, fmt.Errorf("service %s: %w", spec.Services[i].Name, err))
		}
	}
	return errors.Join(errs...)
}
