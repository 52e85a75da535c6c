package manifest

import (
	"testing"
)

// TestManifest_ValidationMounts: volume and bind names and container paths
// (reserved paths refused, one mount per path) and host devices.
func TestManifest_ValidationMounts(t *testing.T) {
	checkRefusals(t, []refusalCase{
		{"volume name required", base + "[[services.web.volume]]\npath = \"/data\"\n", "services.web.volume[0].name", "required: the volume name"},
		{"volume name rule", base + "[[services.web.volume]]\nname = \"_data\"\npath = \"/data\"\n", "services.web.volume[0].name", `invalid volume name "_data": want a letter or digit followed by letters, digits, '_', '.' or '-'`},
		{"volume path required", base + "[[services.web.volume]]\nname = \"data\"\n", "services.web.volume[0].path", `required: the absolute path inside the container, e.g. "/var/lib/data"`},
		{"volume path absolute", base + "[[services.web.volume]]\nname = \"data\"\npath = \"data\"\n", "services.web.volume[0].path", `path "data" must be absolute, e.g. "/var/lib/data"`},
		{"volume path clean", base + "[[services.web.volume]]\nname = \"data\"\npath = \"/srv/../data/\"\n", "services.web.volume[0].path", `path "/srv/../data/" is not clean: want "/data"`},
		{"volume path not root", base + "[[services.web.volume]]\nname = \"data\"\npath = \"/\"\n", "services.web.volume[0].path", `path "/" is reserved: /, /proc, /sys, /dev and /run/secrets (and anything below the last four) cannot be mount targets`},
		{"volume path not under /run/secrets", base + "[[services.web.volume]]\nname = \"data\"\npath = \"/run/secrets/x\"\n", "services.web.volume[0].path", `path "/run/secrets/x" is reserved: /, /proc, /sys, /dev and /run/secrets (and anything below the last four) cannot be mount targets`},
		{"bind path not /sys", base + "[[services.web.bind]]\nname = \"cfg\"\npath = \"/sys\"\n", "services.web.bind[0].path", `path "/sys" is reserved: /, /proc, /sys, /dev and /run/secrets (and anything below the last four) cannot be mount targets`},
		{"bind path not under /dev", base + "[[services.web.bind]]\nname = \"cfg\"\npath = \"/dev/shm\"\n", "services.web.bind[0].path", `path "/dev/shm" is reserved: /, /proc, /sys, /dev and /run/secrets (and anything below the last four) cannot be mount targets`},
		{"bind name required", base + "[[services.web.bind]]\npath = \"/etc/app\"\n", "services.web.bind[0].name", "required: the bind name (the key of an operator-approved path in the bind policy)"},
		{"bind name rule", base + "[[services.web.bind]]\nname = \"my config\"\npath = \"/etc/app\"\n", "services.web.bind[0].name", `invalid bind name "my config": want a letter or digit followed by letters, digits, '_', '.' or '-'`},
		{"bind readonly is a boolean", base + "[[services.web.bind]]\nname = \"cfg\"\npath = \"/etc/app\"\nreadonly = \"yes\"\n", "services.web.bind[0].readonly", "wrong type: want a boolean, got a string"},
		{"mount paths unique", base + "[[services.web.volume]]\nname = \"data\"\npath = \"/data\"\n[[services.web.bind]]\nname = \"cfg\"\npath = \"/data\"\n", "services.web.bind[0].path", `path "/data" is already mounted by services.web.volume[0]: each container path takes one mount`},
		{"device under /dev", base + "devices = [\"/tmp/gpu\"]\n", "services.web.devices[0]", `invalid device "/tmp/gpu": want a clean absolute path under /dev, e.g. "/dev/ttyUSB0"`},
		{"device not /dev itself", base + "devices = [\"/dev/\"]\n", "services.web.devices[0]", `invalid device "/dev/": want a clean absolute path under /dev, e.g. "/dev/ttyUSB0"`},
		{"device listed once", base + "devices = [\"/dev/fuse\", \"/dev/fuse\"]\n", "services.web.devices[1]", `device "/dev/fuse" is already listed at services.web.devices[0]`},
	})
}
