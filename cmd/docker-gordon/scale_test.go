package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scale APP SERVICE=N…: each argument is SERVICE=N, a service at most once.
func TestScale_ParsesServiceCounts(t *testing.T) {
	got, err := parseScaleArgs([]string{"web=3", "api=1"})
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"web": 3, "api": 1}, got)
	for _, bad := range [][]string{{"web"}, {"=3"}, {"web=three"}, {"web=2", "web=3"}} {
		_, err := parseScaleArgs(bad)
		assert.Error(t, err, "%v", bad)
	}
}
