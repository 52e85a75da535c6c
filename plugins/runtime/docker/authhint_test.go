package docker

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A registry's refusal says what to do: log in when no credentials were
// sent, check the login when they were refused; other errors are kept.
func TestS26_RegistryRefusalSaysToLogIn(t *testing.T) {
	refused := errors.New(`Head "http://127.0.0.1:5000/v2/x/manifests/1": no basic auth credentials`)
	err := authHint(refused, "127.0.0.1:5000/x:1", "")
	assert.ErrorIs(t, err, refused)
	assert.Contains(t, err.Error(), "run `docker login 127.0.0.1:5000`")

	denied := errors.New("unauthorized: authentication required")
	assert.Contains(t, authHint(denied, "registry.example/blog:1", "eyJ9").Error(), "registry.example refused the credentials")
	assert.Contains(t, authHint(denied, "blog:1", "").Error(), "docker login docker.io")

	other := errors.New("connection refused")
	assert.Equal(t, other, authHint(other, "blog:1", ""))
}
