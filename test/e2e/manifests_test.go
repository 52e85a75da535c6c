package e2e

import (
	"fmt"
	"regexp"
)

// The manifests and response identities the e2e tests share.

// webManifest is a one-service app: stateless HTTP behind host.
func webManifest(app, image, host string, extra string) string {
	return fmt.Sprintf(`name = %q
[services.web]
image = %q
stop_grace = "10s"
%s
[[services.web.http]]
port = 8080
host = %q
[services.web.readiness]
type = "http"
path = "/healthz"
timeout = "20s"
`, app, image, extra, host)
}

var instanceRE = regexp.MustCompile(`instance=(\S+)`)

func instanceOf(body []byte) string {
	m := instanceRE.FindSubmatch(body)
	if m == nil {
		return "?"
	}
	return string(m[1])
}

var versionRE = regexp.MustCompile(`version=(\S+)`)

func versionOf(body string) string {
	m := versionRE.FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return m[1]
}

// kvManifest is a one-service volume app (single-writer: sequential flow).
func kvManifest(app, image, host string) string {
	return fmt.Sprintf(`name = %q
[services.kv]
image = %q
stop_grace = "3s"
[[services.kv.http]]
port = 8080
host = %q
[[services.kv.volume]]
name = "data"
path = "/data"
[services.kv.readiness]
type = "log"
pattern = "ready"
timeout = "20s"
`, app, image, host)
}
