package manifest

import (
	"testing"
)

// TestManifest_ValidationSecrets: a secret is delivered as an environment
// variable or a file, named by a valid secret name, never both env and
// secret for one variable.
func TestManifest_ValidationSecrets(t *testing.T) {
	checkRefusals(t, []refusalCase{
		{"secret value shape", base + "[services.web.secrets]\nTOKEN = 5\n", "services.web.secrets.TOKEN", `want a secret name (a string) or an inline table { name = "...", as = "file" | "env" }, got an integer`},
		{"secret name required", base + "[services.web.secrets]\nTOKEN = { as = \"env\" }\n", "services.web.secrets.TOKEN.name", `required: the secret's name, as given to "docker gordon secrets set"`},
		{"secret name rule", base + "[services.web.secrets]\nTOKEN = \".token\"\n", "services.web.secrets.TOKEN", `invalid secret name ".token": want letters, digits, '_', '.' or '-', not starting with '.'`},
		{"secret name rule in table", base + "[services.web.secrets]\nTOKEN = { name = \"a/b\" }\n", "services.web.secrets.TOKEN.name", `invalid secret name "a/b": want letters, digits, '_', '.' or '-', not starting with '.'`},
		{"secret as", base + "[services.web.secrets]\nTOKEN = { name = \"t\", as = \"volume\" }\n", "services.web.secrets.TOKEN.as", `invalid delivery "volume": want "env" (an environment variable) or "file" (/run/secrets/<name>)`},
		{"secret unknown key", base + "[services.web.secrets]\nTOKEN = { name = \"t\", mode = \"0400\" }\n", "services.web.secrets.TOKEN.mode", `unknown key "mode": want one of name, as`},
		{"secret env name", base + "[services.web.secrets]\n\"API-KEY\" = \"api\"\n", "services.web.secrets.API-KEY", `invalid environment variable name "API-KEY": want a letter or '_' followed by letters, digits or '_'`},
		{"secret file name", base + "[services.web.secrets]\n\".cert\" = { name = \"cert\", as = \"file\" }\n", "services.web.secrets..cert", `invalid secret file name ".cert": want letters, digits, '_', '.' or '-', not starting with '.'`},
		{"secret file unique", base + "[services.web.secrets]\nA = { name = \"cert\", as = \"file\" }\nB = { name = \"cert\", as = \"file\" }\n", "services.web.secrets.B", `secret "cert" is already delivered as a file by services.web.secrets.A: each file secret must name a different secret`},
		{"secret vs service env", base + "[services.web.env]\nTOKEN = \"x\"\n[services.web.secrets]\nTOKEN = \"t\"\n", "services.web.secrets.TOKEN", "TOKEN is also set in services.web.env: a variable comes from env or from a secret, not both"},
		{"secret vs app env", "name = \"blog\"\n[env]\nTOKEN = \"x\"\n[services.web]\nimage = \"blog:1\"\n[services.web.secrets]\nTOKEN = \"t\"\n", "services.web.secrets.TOKEN", "TOKEN is also set in the app-wide env: a variable comes from env or from a secret, not both"},
	})
}
