package usererr

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gordon-deploy/docker-gordon/core"
)

// A warning names its leftover container only when there is one: never an
// empty "(leftover )".
func TestWarningLineNamesALeftoverOnlyWhenThereIsOne(t *testing.T) {
	assert.Equal(t, "warning: web: after_switch hook failed", WarningLine(core.Warning{Service: "web", Detail: "after_switch hook failed"}))
	assert.Equal(t, "warning: notify failed", WarningLine(core.Warning{Detail: "notify failed"}))
	assert.Equal(t, "warning: web: not removed (leftover container 0123456789ab)",
		WarningLine(core.Warning{Service: "web", Detail: "not removed", Leftover: "0123456789abcdef0123"}))
}
