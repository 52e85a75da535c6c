package manifest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestManifest_NotifyWebhook: [notify] webhook is an http(s) URL with a
// host and no user info; the table is strict like every other.
func TestManifest_NotifyWebhook(t *testing.T) {
	spec, err := Parse("app.toml", []byte(base+"[notify]\nwebhook = \"https://hooks.example.com/gordon?token=abc\"\n"))
	require.NoError(t, err)
	require.NotNil(t, spec.Notify)
	assert.Equal(t, "https://hooks.example.com/gordon?token=abc", spec.Notify.Webhook)

	spec, err = Parse("app.toml", []byte(base))
	require.NoError(t, err)
	assert.Nil(t, spec.Notify, "no [notify], no notifications")

	checkRefusals(t, []refusalCase{
		{"webhook required", base + "[notify]\n", "notify", `[notify] needs webhook = "https://…": the URL each operation outcome is POSTed to`},
		{"unknown notify key", base + "[notify]\nwebhook = \"https://h.example\"\nslack = \"x\"\n", "notify.slack", `unknown key "slack": want one of webhook`},
		{"scheme", base + "[notify]\nwebhook = \"ftp://h.example/x\"\n", "notify.webhook", `webhook "ftp://h.example/x": want an http:// or https:// URL`},
		{"no host", base + "[notify]\nwebhook = \"https:///x\"\n", "notify.webhook", `webhook "https:///x": the URL has no host`},
		{"user info", base + "[notify]\nwebhook = \"https://bob:pw@h.example/x\"\n", "notify.webhook", `webhook "https://bob:xxxxx@h.example/x": put no user or password in the URL (it is stored in every revision); use a token in the path or query if the receiver needs one`},
	})
}
