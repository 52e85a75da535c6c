package journal

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

// R82: a project file is stored once under its content-addressed name,
// read-only with the given execute bits (write bits never), and found by
// name; an unknown name wraps ErrNotFound.
func TestR82_StoredProjectFile(t *testing.T) {
	s := newTestStore(t)
	ctx := context.Background()
	_, err := s.FilePath(ctx, "blog", "abc-444")
	require.ErrorIs(t, err, core.ErrNotFound)
	p, err := s.PutFile(ctx, "blog", "abc-555", []byte("#!/bin/sh"), 0o755)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(s.Dir(), "files", "blog", "abc-555"), p)
	fi, err := os.Stat(p)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o555), fi.Mode().Perm())
	again, err := s.PutFile(ctx, "blog", "abc-555", []byte("#!/bin/sh"), 0o555)
	require.NoError(t, err)
	assert.Equal(t, p, again)
	found, err := s.FilePath(ctx, "blog", "abc-555")
	require.NoError(t, err)
	assert.Equal(t, p, found)
	_, err = s.PutFile(ctx, "blog", "../x", nil, 0o444)
	require.ErrorIs(t, err, core.ErrInvalid)
}
