package composeapi

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	toml "github.com/pelletier/go-toml/v2"
)

// BindPolicy is the compose loader's bind check (the loader's
// Options.BindName): every bind refused with Refusal when it is set (a
// remote engine, whose approved binds this machine cannot read), else the
// binds the operator approved in StateDir's config.toml (BindNameFor).
type BindPolicy struct {
	StateDir string `json:"state_dir,omitempty"`
	Refusal  string `json:"refusal,omitempty"`
}

// Name returns the approved bind name of hostPath, or why it is refused.
func (p BindPolicy) Name(hostPath string) (string, error) {
	if p.Refusal != "" {
		return "", errors.New(p.Refusal)
	}
	return BindNameFor(p.StateDir, hostPath)
}

// BindNameFor returns the name of the approved bind whose host path is
// hostPath ([binds] of <state>/config.toml), or an error saying how to
// approve it.
func BindNameFor(stateDir, hostPath string) (string, error) {
	cfgPath := filepath.Join(stateDir, "config.toml")
	suggest := BindSuggestion(hostPath)
	data, err := os.ReadFile(cfgPath)
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("host path %s is not approved for binds: the operator adds it under [binds] in %s, e.g. %s", hostPath, cfgPath, suggest)
	}
	if err != nil {
		return "", err
	}
	var cfg struct {
		Binds map[string]string `toml:"binds"`
	}
	if err := toml.Unmarshal(data, &cfg); err != nil {
		return "", fmt.Errorf("%s: %w", cfgPath, err)
	}
	var names []string
	for name, p := range cfg.Binds {
		if filepath.Clean(p) == hostPath {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return "", fmt.Errorf("host path %s is not approved for binds: the operator adds it under [binds] in %s, e.g. %s", hostPath, cfgPath, suggest)
	}
	sort.Strings(names)
	return names[0], nil
}

// bareKeyRE matches a TOML bare key.
var bareKeyRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// BindSuggestion returns the line an operator adds under [binds] in the
// state directory's config.toml to approve hostPath for compose binds,
// valid TOML when pasted as it is: a bind name derived from the path's last
// element, quoted when it is not a bare key (a dotted file name such as
// app.conf would otherwise be read as nested tables), and the path as a
// TOML string. For example "/srv/site" gives `site = "/srv/site"` and
// "/srv/app.conf" gives `"app.conf" = "/srv/app.conf"`.
func BindSuggestion(hostPath string) string {
	key := suggestedBindName(hostPath)
	if !bareKeyRE.MatchString(key) {
		key = tomlString(key)
	}
	return key + " = " + tomlString(hostPath)
}

// suggestedBindName derives a valid bind name (a letter or digit followed
// by letters, digits, '_', '.' or '-') from the last element of hostPath:
// other characters become '-', leading '.', '_' and '-' are dropped, and
// "data" stands in when nothing is left.
func suggestedBindName(hostPath string) string {
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '.', r == '-':
			return r
		}
		return '-'
	}, filepath.Base(hostPath))
	name = strings.TrimLeft(name, "._-")
	if name == "" {
		return "data"
	}
	return name
}

// tomlString writes s as a TOML basic string: '"' and '\' escaped, control
// characters as \uXXXX (or \t, \n, \r).
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
