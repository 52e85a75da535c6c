package manifest

import (
	"maps"
	"slices"
	"strings"

	"github.com/gordon-deploy/docker-gordon/core"
)

// secrets validates [services.<name>.secrets]: ENV = "secret-name" or
// ENV = { name = "...", as = "file" | "env" }.
func (v *validator) secrets(svcKey string, raw map[string]any, env, appEnv map[string]string) []core.SecretRef {
	var out []core.SecretRef
	files := map[string]string{} // secret name delivered as a file -> key
	for _, envKey := range slices.Sorted(maps.Keys(raw)) {
		k := svcKey + ".secrets." + envKey
		ref := core.SecretRef{Env: envKey, As: "env"}
		nameKey := k
		ok := true
		nameGiven := false
		switch t := raw[envKey].(type) {
		case string:
			ref.Name = t
			nameGiven = true
		case map[string]any:
			for _, kk := range slices.Sorted(maps.Keys(t)) {
				if kk != "name" && kk != "as" {
					v.addf(k+"."+kk, "unknown key %q: want one of %s", kk, strings.Join(secretKeys, ", "))
					ok = false
				}
			}
			nameKey = k + ".name"
			switch n := t["name"].(type) {
			case string:
				ref.Name = n
				nameGiven = true
			case nil:
				v.add(nameKey, `required: the secret's name, as given to "docker gordon secrets set"`)
				ok = false
			default:
				v.addf(nameKey, "must be a string, got %s", tomlType(n))
				ok = false
			}
			switch as := t["as"].(type) {
			case nil:
			case string:
				if as != "env" && as != "file" {
					v.addf(k+".as", `invalid delivery %q: want "env" (an environment variable) or "file" (/run/secrets/<name>)`, as)
					ok = false
				}
				ref.As = as
			default:
				v.addf(k+".as", `must be a string, "env" or "file", got %s`, tomlType(as))
				ok = false
			}
		default:
			v.addf(k, `want a secret name (a string) or an inline table { name = "...", as = "file" | "env" }, got %s`, tomlType(t))
			continue
		}
		if nameGiven {
			if !secretNameRE.MatchString(ref.Name) {
				v.addf(nameKey, "invalid secret name %q: %s", ref.Name, secretNameRule)
				ok = false
			}
		}
		switch ref.As {
		case "env":
			if !envNameRE.MatchString(envKey) {
				v.addf(k, "invalid environment variable name %q: %s", envKey, envNameRule)
				ok = false
			} else if _, dup := env[envKey]; dup {
				v.addf(k, "%s is also set in %s.env: a variable comes from env or from a secret, not both", envKey, svcKey)
				ok = false
			} else if _, dup := appEnv[envKey]; dup {
				v.addf(k, "%s is also set in the app-wide env: a variable comes from env or from a secret, not both", envKey)
				ok = false
			}
		case "file":
			if !secretNameRE.MatchString(envKey) {
				v.addf(k, "invalid secret file name %q: %s", envKey, secretNameRule)
				ok = false
			}
			if prev, dup := files[ref.Name]; dup && ref.Name != "" {
				v.addf(k, "secret %q is already delivered as a file by %s: each file secret must name a different secret", ref.Name, prev)
				ok = false
			} else {
				files[ref.Name] = k
			}
		}
		if ok {
			out = append(out, ref)
		}
	}
	return out
}
