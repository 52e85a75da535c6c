package manifest

import (
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// tomlKeys lists the toml keys of struct type t.
func tomlKeys(t reflect.Type) []string {
	var keys []string
	for f := range t.Fields() {
		if k, _, _ := strings.Cut(f.Tag.Get("toml"), ","); k != "" && k != "-" {
			keys = append(keys, k)
		}
	}
	return keys
}

// An unknown key's message lists every key the table accepts: each key a
// table decodes is in its list, so a typo never hides a real key.
func TestManifest_UnknownKeyMessagesListEveryKeyATableAccepts(t *testing.T) {
	for _, c := range []struct {
		table   any
		allowed []string
	}{
		{rawService{}, serviceKeys},
		{rawBackup{}, backupKeys},
		{rawSnapshots{}, snapshotsKeys},
	} {
		typ := reflect.TypeOf(c.table)
		assert.ElementsMatch(t, tomlKeys(typ), c.allowed, "the keys listed for %s", typ.Name())
	}
	var msgs []string
	for _, p := range parseProblems(t, base+"[services.web.backup]\nevery = \"1h\"\ncmd = [\"dump\"]\n") {
		msgs = append(msgs, p.Message)
	}
	assert.Contains(t, msgs, `unknown key "cmd": want one of every, schedule, keep, command, timeout`)
}
