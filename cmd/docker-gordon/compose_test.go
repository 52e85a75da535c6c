package main

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// An unmapped image VOLUME of a compose service is explained in compose
// terms too.
func TestComposeVolumeHint(t *testing.T) {
	err := errors.Join(&engine.ImageVolumeError{App: "shop", Service: "db", Image: "postgres:16", Paths: []string{"/var/lib/postgresql/data"}},
		errors.New("unrelated"))
	assert.Equal(t, "\nIn the compose file, map it to a named volume:\n\nservices:\n  db:\n    volumes:\n      - db-data:/var/lib/postgresql/data\nvolumes:\n  db-data:\n", composeVolumeHint(err))
	assert.Equal(t, "", composeVolumeHint(errors.New("other")))
}
