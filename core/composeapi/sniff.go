package composeapi

import (
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/pelletier/go-toml/v2"

	"github.com/gordon-deploy/docker-gordon/core/manifest"
)

// IsComposeFile reads the head of path and reports whether it is a compose
// file (YAML with services: or include:) rather than a TOML manifest; a
// .yml/.yaml file that parses as neither counts as compose, so that its
// YAML error is the one reported.
func IsComposeFile(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, manifest.MaxSize+1))
	if err != nil {
		return false, err
	}
	if IsCompose(data) {
		return true, nil
	}
	// A .yml/.yaml file that is no TOML either is a compose file with a
	// mistake: the compose loader, not the TOML parser, reports it.
	if ext := strings.ToLower(filepath.Ext(path)); ext == ".yml" || ext == ".yaml" {
		var probe map[string]any
		if toml.Unmarshal(data, &probe) != nil {
			return true, nil
		}
	}
	return false, nil
}
