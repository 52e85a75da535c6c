package engine

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gordon-deploy/docker-gordon/core/engine/steps"
)

// TestFacadeCarriesEveryEngineSetting: the facade's exported fields are
// exactly the steps layer's settings, so flows() can hand each one down
// (a setting added below and not here would be silently dropped).
func TestFacadeCarriesEveryEngineSetting(t *testing.T) {
	exported := func(t reflect.Type) []string {
		var out []string
		for i := 0; i < t.NumField(); i++ {
			if f := t.Field(i); f.IsExported() && f.Name != "State" {
				out = append(out, f.Name)
			}
		}
		return out
	}
	assert.Equal(t, exported(reflect.TypeFor[steps.Engine]()), exported(reflect.TypeFor[Engine]()))
	e := &Engine{LogTailLines: 7, EdgeNetwork: "edge", RegistryOnly: true}
	s := e.flows().Engine.Engine.Engine.Engine
	assert.Equal(t, 7, s.LogTailLines)
	assert.Equal(t, "edge", s.EdgeNetwork)
	assert.True(t, s.RegistryOnly)
	assert.Same(t, e.flows().State, s.State, "one State per facade")
}
