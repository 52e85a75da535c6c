package compose

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestReservedNames_RefusedInCompose: a compose project named after a
// system object, a service in the system's namespace and an external
// network of the system are refused at their lines, as in a manifest.
func TestReservedNames_RefusedInCompose(t *testing.T) {
	cases := []struct {
		name, yaml, key string
		line            int
		want            string
	}{
		{"project edge", "name: edge\nservices:\n  web:\n    image: web:1\n", "name", 1, `app name "edge" is reserved`},
		{"project reconcile", "name: reconcile\nservices:\n  web:\n    image: web:1\n", "name", 1, `app name "reconcile" is reserved`},
		{"service gordon-reconcile", "name: shop\nservices:\n  gordon-reconcile:\n    image: web:1\n", "services.gordon-reconcile", 3, `service name "gordon-reconcile" is reserved`},
		{"external network gordon-edge", webHead + "    networks: [edge]\nnetworks:\n  edge:\n    name: gordon-edge\n    external: true\n", "networks", 6, `network "gordon-edge" is reserved`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := refusal(t, c.yaml, c.key)
			assert.Equal(t, c.line, p.Line, "line of %s: %s", c.key, p)
			assert.Contains(t, p.Message, c.want)
		})
	}
}
