package usererr

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Messages name what failed without the engine's error classes or Go's
// context errors.
func TestUserWordsDropErrorClassesAndGoContextErrors(t *testing.T) {
	for in, want := range map[string]string{
		"state conflict: before_switch hook exited with status 3":                                        "before_switch hook exited with status 3",
		"deploy hooky: web: after_switch hook failed: state conflict: exited with status 3":              "deploy hooky: web: after_switch hook failed: exited with status 3",
		`not found: app "nosuch" not found`:                                                              `app "nosuch" not found`,
		"edge serves another state directory; stop it first (docker gordon system stop): state conflict": "edge serves another state directory; stop it first (docker gordon system stop)",
		"readiness of web: context canceled":                                                             "readiness of web: interrupted",
		"deploy blog: interrupted: context canceled":                                                     "deploy blog: interrupted",
		"gave up: context deadline exceeded":                                                             "gave up: timed out",
		"image x not found: pull failed":                                                                 "image x not found: pull failed",
	} {
		assert.Equal(t, want, Words(in), in)
	}
}
