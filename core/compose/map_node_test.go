package compose

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// On a swarm: x-gordon.node pins a service to a swarm node (the
// manifest's node); anything but a non-empty string is refused.
func TestCompose_XGordonNodePinsTheService(t *testing.T) {
	dir := writeProject(t, map[string]string{"compose.yaml": `
name: shop
services:
  db:
    image: postgres:16
    x-gordon: { node: gsr-n2 }
`})
	res, err := load(t, dir, "compose.yaml")
	require.NoError(t, err)
	assert.Equal(t, "gsr-n2", svcOf(t, res.Spec, "db").Node)

	dir = writeProject(t, map[string]string{"compose.yaml": `
name: shop
services:
  db:
    image: postgres:16
    x-gordon: { node: [a, b] }
`})
	_, err = load(t, dir, "compose.yaml")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "services.db.x-gordon.node")
	assert.Contains(t, err.Error(), "want a swarm node's hostname or ID")
}
