package docker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A system container is replaced exactly when its image or its
// configuration changes: the config hash follows both.
func TestConfigHashFollowsImageAndFlags(t *testing.T) {
	u := Unit{Kind: "edge", Cmd: []string{"run", "--http-addr", ":80"}, Binds: []string{"/s:/s"}, StopGrace: 35 * time.Second}
	h := u.ConfigHash("sha256:a")
	assert.Equal(t, h, u.ConfigHash("sha256:a"))
	assert.NotEqual(t, h, u.ConfigHash("sha256:b"))
	v := u
	v.Cmd = []string{"run", "--http-addr", ":8080"}
	assert.NotEqual(t, h, v.ConfigHash("sha256:a"))
	w := u
	w.StopGrace = 10 * time.Second
	assert.NotEqual(t, h, w.ConfigHash("sha256:a"), "the stop grace is part of the container's config")
}

func TestShortIDIsTwelveHexDigits(t *testing.T) {
	assert.Equal(t, "0123456789ab", shortID("sha256:0123456789abcdef"))
	assert.Equal(t, "abc", shortID("abc"))
}
