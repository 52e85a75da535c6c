package manifest

import (
	"testing"
)

// TestManifest_ValidationContainerKeys: the container keys with compose's
// names (stop_signal, resources, tmpfs, ulimits, healthcheck) and
// depends_on (SPEC R20).
func TestManifest_ValidationContainerKeys(t *testing.T) {
	checkRefusals(t, []refusalCase{
		{"stop_signal is a signal", base + "stop_signal = \"SIGSTOPNOW\"\n", "services.web.stop_signal", `unknown signal "SIGSTOPNOW": want a Linux signal name such as "SIGTERM", "SIGINT", "SIGQUIT" or "SIGUSR1" (or its number)`},
		{"memory is a size", base + "[services.web.resources]\nmemory = \"lots\"\n", "services.web.resources.memory", `invalid size "lots": want a size such as "64m", "512m" or "2g" (units b, k, m, g, t; 1024-based) or an integer number of bytes`},
		{"cpus positive", base + "[services.web.resources]\ncpus = -1\n", "services.web.resources.cpus", "invalid cpus -1: want more than 0 (at least 0.001) and at most 1024 CPUs, e.g. 0.5 or 2"},
		{"tmpfs path absolute", base + "tmpfs = [\"tmp:size=1m\"]\n", "services.web.tmpfs[0]", `invalid tmpfs "tmp:size=1m": path "tmp" must be absolute, e.g. "/var/lib/data"; want "path" or "path:options", e.g. "/tmp:size=64m,mode=1777"`},
		{"depends_on cycle", "name = \"blog\"\n[services.a]\nimage = \"a:1\"\ndepends_on = [\"b\"]\n[services.b]\nimage = \"b:1\"\ndepends_on = [\"a\"]\n", "services.a.depends_on[0]", "dependency cycle: a -> b -> a; remove one of these depends_on entries"},
		{"depends_on known", base + "depends_on = [\"db\"]\n", "services.web.depends_on[0]", `unknown service "db": the app has no other service`},
		{"memory at least 6m", base + "[services.web.resources]\nmemory = \"1m\"\n", "services.web.resources.memory", "memory limit 1m is below Docker's minimum of 6m"},
		{"ulimit soft above hard", base + "ulimits = { nofile = { soft = 10, hard = 5 } }\n", "services.web.ulimits.nofile", "invalid ulimit nofile: soft limit 10 is above hard limit 5"},
		{"healthcheck unknown key", base + "[services.web.healthcheck]\ntest = \"true\"\nevery = \"1s\"\n", "services.web.healthcheck.every", `unknown key "every": want one of test, interval, timeout, retries, start_period, disable`},
	})
}
