package manifest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

// TestR72_ManifestHooks: [services.X.hooks] takes before_switch and
// after_switch argv arrays and one timeout for both; the default timeout
// is five minutes.
func TestR72_ManifestHooks(t *testing.T) {
	spec, err := Parse("app.toml", []byte(base+"[services.web.hooks]\nbefore_switch = [\"bin/migrate\", \"up\"]\nafter_switch = [\"sh\", \"-c\", \"echo ok\"]\ntimeout = \"30s\"\n"))
	require.NoError(t, err)
	h := spec.Services[0].Hooks
	require.NotNil(t, h)
	require.NotNil(t, h.BeforeSwitch)
	require.NotNil(t, h.AfterSwitch)
	assert.Equal(t, []string{"bin/migrate", "up"}, h.BeforeSwitch.Command)
	assert.Equal(t, []string{"sh", "-c", "echo ok"}, h.AfterSwitch.Command)
	assert.Equal(t, 30*time.Second, h.BeforeSwitch.EffectiveTimeout())
	assert.Equal(t, 30*time.Second, h.AfterSwitch.EffectiveTimeout())

	spec, err = Parse("app.toml", []byte(base+"[services.web.hooks]\nafter_switch = [\"true\"]\n"))
	require.NoError(t, err)
	assert.Nil(t, spec.Services[0].Hooks.BeforeSwitch)
	assert.Equal(t, core.DefaultHookTimeout, spec.Services[0].Hooks.AfterSwitch.EffectiveTimeout())

	spec, err = Parse("app.toml", []byte(base))
	require.NoError(t, err)
	assert.Nil(t, spec.Services[0].Hooks, "no [hooks], no hooks")
}

// TestR72_ManifestHookRefusals: every malformed hooks table is refused
// with the key and what would be valid.
func TestR72_ManifestHookRefusals(t *testing.T) {
	checkRefusals(t, []refusalCase{
		{"empty argv", base + "[services.web.hooks]\nbefore_switch = []\n", "services.web.hooks.before_switch",
			`empty command: want the program and its arguments, e.g. ["bin/rails", "db:migrate"] (no shell: use ["sh", "-c", "..."] for one)`},
		{"empty argument", base + "[services.web.hooks]\nafter_switch = [\"a\", \"\"]\n", "services.web.hooks.after_switch[1]", "argument must be a non-empty string"},
		{"timeout range", base + "[services.web.hooks]\nafter_switch = [\"a\"]\ntimeout = \"2h\"\n", "services.web.hooks.timeout", "2h is out of range: want from 1s to 1h"},
		{"no hook", base + "[services.web.hooks]\ntimeout = \"1m\"\n", "services.web.hooks",
			`[hooks] declares no hook: add before_switch = ["cmd", "arg"] or after_switch = [...], or remove the table`},
		{"unknown key", base + "[services.web.hooks]\nafter_switch = [\"a\"]\npre_deploy = [\"b\"]\n", "services.web.hooks.pre_deploy",
			`unknown key "pre_deploy": want one of before_switch, after_switch, timeout, post_start, pre_stop`},
		{"one-shot", `name = "blog"

[services.migrate]
image = "blog:1"
run = "once"

[services.migrate.hooks]
before_switch = ["x"]
`, "services.migrate.hooks", `a one-shot service (run = "once") is never switched to, so hooks never run; put the command in the one-shot's command, or the hooks on the service that serves`},
	})
}

// TestR72_ManifestLifecycleHooks: [[hooks.post_start]] and
// [[hooks.pre_stop]] take compose's keys; each needs a command.
func TestR72_ManifestLifecycleHooks(t *testing.T) {
	spec, err := Parse("app.toml", []byte(base+`[[services.web.hooks.post_start]]
command = ["/app", "warm"]
user = "1000"
working_dir = "/srv"
env = { MODE = "warm" }

[[services.web.hooks.pre_stop]]
command = ["/app", "flush"]
`))
	require.NoError(t, err)
	h := spec.Services[0].Hooks
	require.NotNil(t, h)
	assert.Equal(t, []core.HookCommand{{Command: []string{"/app", "warm"}, User: "1000", WorkingDir: "/srv", Env: map[string]string{"MODE": "warm"}}}, h.PostStart)
	assert.Equal(t, []core.HookCommand{{Command: []string{"/app", "flush"}}}, h.PreStop)

	checkRefusals(t, []refusalCase{
		{"no command", base + "[[services.web.hooks.pre_stop]]\nuser = \"1000\"\n", "services.web.hooks.pre_stop[0].command",
			`required: the program and its arguments, e.g. ["/app", "warm-cache"]`},
		{"relative working_dir", base + "[[services.web.hooks.post_start]]\ncommand = [\"a\"]\nworking_dir = \"srv\"\n", "services.web.hooks.post_start[0].working_dir",
			`working_dir "srv": want an absolute path in the container`},
		{"unknown key", base + "[[services.web.hooks.post_start]]\ncommand = [\"a\"]\nprivileged = true\n", "services.web.hooks.post_start[0].privileged",
			`unknown key "privileged": want one of command, user, working_dir, env`},
	})
}
