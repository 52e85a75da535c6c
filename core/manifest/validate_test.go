package manifest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

// base is a valid manifest that the table cases extend.
const base = `name = "blog"

[services.web]
image = "blog:1"
`

// parseProblems parses doc and returns its problems (nil when valid).
func parseProblems(t *testing.T, doc string) []Problem {
	t.Helper()
	_, err := Parse("app.toml", []byte(doc))
	if err == nil {
		return nil
	}
	var merr *ManifestError
	require.ErrorAs(t, err, &merr, "every failure is a *ManifestError")
	require.ErrorIs(t, err, core.ErrInvalid)
	return merr.Problems
}

// refusalCase is a manifest that must be refused with exactly one problem,
// at key, with message msg.
type refusalCase struct {
	name, doc, key, msg string
}

// checkRefusals runs one subtest per case: the manifest is refused with
// exactly one problem, at the given key, with the given message, located
// in the source unless it is a missing top-level key.
func checkRefusals(t *testing.T, cases []refusalCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			problems := parseProblems(t, tc.doc)
			require.Len(t, problems, 1, "problems: %v", problems)
			assert.Equal(t, tc.key, problems[0].Key)
			assert.Equal(t, tc.msg, problems[0].Message)
			if missingTopLevel := tc.name == "name required" || tc.name == "at least one service"; !missingTopLevel {
				assert.Positive(t, problems[0].Line, "the problem is located in the source")
			} else {
				assert.Zero(t, problems[0].Line, "a missing top-level key has no position")
			}
		})
	}
}

// TestManifest_ValidationApp: the app name, the services table, top-level
// keys, shared networks and the app-wide env. The other rules are checked
// by subject, next to the validator they test (validate_*_test.go).
func TestManifest_ValidationApp(t *testing.T) {
	checkRefusals(t, []refusalCase{
		{"name required", "[services.web]\nimage = \"blog:1\"\n", "name", `required: the app name, a DNS label such as "blog"`},
		{"name DNS label", strings.Replace(base, `"blog"`, `"-blog"`, 1), "name", `invalid app name "-blog": want a DNS label: 1-63 lowercase letters, digits or '-', not starting or ending with '-'`},
		{"name at most 63", strings.Replace(base, `"blog"`, `"`+strings.Repeat("a", 64)+`"`, 1), "name", `invalid app name "` + strings.Repeat("a", 64) + `": want a DNS label: 1-63 lowercase letters, digits or '-', not starting or ending with '-'`},
		{"at least one service", "name = \"blog\"\n", "services", "at least one service is required: add a [services.<name>] table with an image"},
		{"unknown top-level key", base + "[deploy]\nstrategy = \"x\"\n", "deploy", `unknown key "deploy": want one of name, env, services, networks, registry, notify, jobs`},
		{"network name", `networks = ["ok", "bad name"]` + "\n" + base, "networks[1]", `invalid network name "bad name": want a letter or digit followed by letters, digits, '_', '.' or '-'`},
		{"network listed twice", `networks = ["edge", "edge"]` + "\n" + base, "networks[1]", `network "edge" is already listed at networks[0]`},
		{"app env name", base + "[env]\n\"A-B\" = \"1\"\n", "env.A-B", `invalid environment variable name "A-B": want a letter or '_' followed by letters, digits or '_'`},
	})
}
