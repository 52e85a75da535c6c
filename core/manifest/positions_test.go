package manifest

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestManifest_KeyPositions: the key index gives the source position of
// table headers, array-of-tables elements, dotted keys, inline tables and
// array elements, under the same canonical keys validation reports.
func TestManifest_KeyPositions(t *testing.T) {
	doc := `name = "blog"
services.api.image = "api:1"
[services.web]
image = "blog:1"
http = [{ port = 80 }, { port = 81, host = "a.example" }]
[[services.web.volume]]
name = "a"
[[services.web.volume]]
  name = "b"
[services.web.readiness]
config = { nested = { deep = 1 } }
`
	idx := indexKeys([]byte(doc))
	for key, want := range map[string]position{
		"name":                                      {1, 1},
		"services":                                  {2, 1},
		"services.api":                              {2, 10},
		"services.api.image":                        {2, 14},
		"services.web":                              {3, 11},
		"services.web.http":                         {5, 1},
		"services.web.http[0]":                      {5, 9},
		"services.web.http[0].port":                 {5, 11},
		"services.web.http[1].host":                 {5, 37},
		"services.web.volume[0]":                    {6, 16},
		"services.web.volume[1]":                    {8, 16},
		"services.web.volume[1].name":               {9, 3},
		"services.web.readiness.config.nested":      {11, 12},
		"services.web.readiness.config.nested.deep": {11, 23},
	} {
		assert.Equal(t, want, idx.pos[key], key)
	}
	// A missing key falls back to its nearest located parent.
	assert.Equal(t, position{8, 16}, idx.lookup("services.web.volume[1].path"))
	assert.Equal(t, position{}, idx.lookup("networks"))
}

// TestManifest_KeyIndexSurvivesBadInput: a syntax error stops the index
// where it is, keeping what came before.
func TestManifest_KeyIndexSurvivesBadInput(t *testing.T) {
	idx := indexKeys([]byte("name = \"a\"\n[services.web\nimage = 1\n"))
	assert.Equal(t, position{1, 1}, idx.pos["name"])
	_, ok := idx.pos["services.web.image"]
	assert.False(t, ok)
}
