package manifest

import (
	"fmt"

	toml "github.com/pelletier/go-toml/v2"

	"github.com/gordon-deploy/docker-gordon/core"
)

// WithBuiltImages returns the manifest data (TOML) with the build table of
// each service named in images removed and its image set to the built
// reference: the manifest as it is stored once the builds ran (SPEC R12),
// which names images only, so no build argument travels further.
// Comments and key order are not kept. A document that does not decode
// wraps core.ErrInvalid.
func WithBuiltImages(data []byte, images map[string]string) ([]byte, error) {
	if len(images) == 0 {
		return data, nil
	}
	var doc map[string]any
	if err := toml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%w: manifest: %w", core.ErrInvalid, err)
	}
	services, _ := doc["services"].(map[string]any)
	for name, ref := range images {
		svc, ok := services[name].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%w: manifest: no service %q", core.ErrInvalid, name)
		}
		delete(svc, "build")
		svc["image"] = ref
	}
	return toml.Marshal(doc)
}
