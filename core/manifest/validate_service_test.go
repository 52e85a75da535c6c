package manifest

import (
	"strings"
	"testing"
)

// TestManifest_ValidationService: a service's image, command, replace
// (SPEC R16), run, stop_grace (R25), env and key types.
func TestManifest_ValidationService(t *testing.T) {
	checkRefusals(t, []refusalCase{
		{"service name DNS label", "name = \"blog\"\n[services.Web]\nimage = \"blog:1\"\n", "services.Web", `invalid service name "Web": want a DNS label: 1-63 lowercase letters, digits or '-', not starting or ending with '-'`},
		{"image required", "name = \"blog\"\n[services.web]\nstop_grace = \"5s\"\n", "services.web.image", `required: the image reference, e.g. "registry.example/blog:1.4" or "name@sha256:<64 hex digits>", or a [build] table`},
		{"image no spaces", strings.Replace(base, `"blog:1"`, `"blog app:1"`, 1), "services.web.image", `invalid image reference "blog app:1": contains whitespace or control characters; want e.g. "nginx:1.27", "registry.example:5000/team/app:1.4" or "name@sha256:<64 hex digits>"`},
		{"image lowercase repository", strings.Replace(base, `"blog:1"`, `"Blog:1"`, 1), "services.web.image", `invalid image reference "Blog:1": repository name must be lowercase; want e.g. "nginx:1.27", "registry.example:5000/team/app:1.4" or "name@sha256:<64 hex digits>"`},
		{"image digest is 64 hex", strings.Replace(base, `"blog:1"`, `"blog@sha256:abc"`, 1), "services.web.image", `invalid image reference "blog@sha256:abc": not of the form [registry[:port]/]name[:tag][@sha256:<64 hex digits>]; want e.g. "nginx:1.27", "registry.example:5000/team/app:1.4" or "name@sha256:<64 hex digits>"`},
		{"command arguments not empty", base + "command = [\"/app\", \"\"]\n", "services.web.command[1]", "argument must be a non-empty string"},
		{"replace value", base + "replace = \"rolling\"\n", "services.web.replace", `invalid replace "rolling": want "overlap" (start the new generation before stopping the old; stateless services only) or "sequential" (stop the old one first)`},
		{"replace overlap needs eligibility", base + "replace = \"overlap\"\n[[services.web.volume]]\nname = \"data\"\npath = \"/data\"\n", "services.web.replace", `replace = "overlap" cannot be honoured: the service is replaced sequentially (single-writer: volume data), so two generations never run at once; remove replace or use "sequential"`},
		{"run value", base + "run = \"twice\"\n", "services.web.run", `invalid run "twice": want "once" (a one-shot run to completion at each deploy), or omit run for a service kept running`},
		{"run once serves nothing", base + "run = \"once\"\n[[services.web.http]]\nport = 80\nhost = \"a.example\"\n", "services.web.http", `a one-shot service (run = "once") runs to completion and serves nothing: remove its http interfaces`},
		{"run once has no readiness", base + "run = \"once\"\n[services.web.readiness]\ntype = \"log\"\npattern = \"x\"\n", "services.web.readiness", `a one-shot service (run = "once") runs to completion and serves nothing: it is waited for until it exits (status 0); remove readiness`},
		{"replicas range", base + "replicas = 0\n", "services.web.replicas", "replicas = 0: want 1..100 instances"},
		{"replicas of a single-writer service", base + "replicas = 3\n[[services.web.volume]]\nname = \"data\"\npath = \"/data\"\n", "services.web.replicas", "replicas = 3: the service runs one instance (single-writer: volume data): two instances would share state or an exclusive resource, and a UDP session must stay on one instance; remove replicas, or move the state out of the service"},
		{"replicas of a UDP service", base + "replicas = 2\n[[services.web.udp]]\nport = 53\npublish = \"0.0.0.0:53\"\n", "services.web.replicas", "replicas = 2: the service runs one instance (UDP port 53): two instances would share state or an exclusive resource, and a UDP session must stay on one instance; remove replicas, or move the state out of the service"},
		{"replicas of a one-shot", base + "replicas = 2\nrun = \"once\"\n", "services.web.replicas", `replicas = 2: a one-shot service (run = "once") runs one instance to completion; remove replicas`},
		{"stop_grace parses", base + "stop_grace = \"soon\"\n", "services.web.stop_grace", `invalid duration "soon": want a Go duration from 1s to 5m, such as "30s" or "2m"`},
		{"stop_grace at least 1s", base + "stop_grace = \"500ms\"\n", "services.web.stop_grace", "500ms is out of range: want from 1s to 5m"},
		{"stop_grace at most 5m", base + "stop_grace = \"5m1s\"\n", "services.web.stop_grace", "5m1s is out of range: want from 1s to 5m"},
		{"service env name", base + "[services.web.env]\n\"9LIVES\" = \"x\"\n", "services.web.env.9LIVES", `invalid environment variable name "9LIVES": want a letter or '_' followed by letters, digits or '_'`},
		{"env value is a string", base + "[services.web.env]\nDEBUG = true\n", "services.web.env.DEBUG", `value must be a string, got a boolean: quote it, e.g. DEBUG = "true"`},
		{"env value not a table", base + "[services.web.env]\nX = { a = \"b\" }\n", "services.web.env.X", "value must be a string, got a table"},
		{"unknown service key", base + "scale = 2\n", "services.web.scale", `unknown key "scale": want one of image, build, entrypoint, command, stop_grace, stop_signal, env, secrets, http, tcp, udp, readiness, healthcheck, volume, bind, config, devices, depends_on, user, working_dir, init, read_only, shm_size, tmpfs, ulimits, cap_add, cap_drop, sysctls, extra_hosts, labels, resources, logging, replace, run, replicas, node, placement, aliases, hooks, monitor, sleep_after, wake_ignore, snapshots, backup`},
		{"node is a hostname or ID", base + "node = \"node 1\"\n", "services.web.node", `invalid node "node 1": want a swarm node's hostname or ID (letters, digits, ".", "_", "-"), as docker node ls shows it`},
		{"alias characters", base + "aliases = [\"my db\"]\n", "services.web.aliases[0]", `invalid alias "my db": want 1-63 letters, digits, ".", "_" or "-", starting with a letter or digit`},
		{"alias is another service's name", base + "aliases = [\"db\"]\n[services.db]\nimage = \"pg:16\"\n", "services.web.aliases[0]", `alias "db" is already the name or an alias of service db: other services could not tell them apart on the app network; choose another`},
		{"wrong type", base + "stop_grace = 30\n", "services.web.stop_grace", "wrong type: want a string, got an integer"},
		{"wrong type in array", base + "http = [{ port = 80 }, { port = \"81\" }]\n", "services.web.http[1].port", "wrong type: want an integer, got a string"},
		{"wrong type for a map", "name = \"blog\"\nenv = []\n[services.web]\nimage = \"blog:1\"\n", "env", "wrong type: want a table, got an array"},
		{"interfaces are arrays of tables", base + "[services.web.tcp]\nport = 9000\npublish = \"0.0.0.0:9000\"\n", "services.web.tcp", "wrong type: want an array of tables, written [[services.web.tcp]], got a table"},
		{"services is a table", "name = \"blog\"\n[[services]]\nimage = \"blog:1\"\n", "services", "wrong type: want a table, got an array of tables"},
	})
}

// TestManifest_Build: [services.X.build] (image builds): image is optional with
// a build; context is required; dockerfile stays inside the context; args
// are strings; a built image cannot be tagged with a digest.
func TestManifest_Build(t *testing.T) {
	checkRefusals(t, []refusalCase{
		{"context required", "name = \"blog\"\n[services.web.build]\ndockerfile = \"Dockerfile\"\n", "services.web.build.context", `required: the build context directory, relative to this manifest (e.g. "." or "./web")`},
		{"dockerfile inside the context", "name = \"blog\"\n[services.web.build]\ncontext = \".\"\ndockerfile = \"../Dockerfile\"\n", "services.web.build.dockerfile", `dockerfile "../Dockerfile" must be a path inside the context, relative to it (the context is what is sent to the engine)`},
		{"args are strings", "name = \"blog\"\n[services.web.build]\ncontext = \".\"\nargs = { VERSION = 3 }\n", "services.web.build.args.VERSION", `value must be a string, got an integer: quote it, e.g. VERSION = "3"`},
		{"arg names", "name = \"blog\"\n[services.web.build]\ncontext = \".\"\nargs = { \"1X\" = \"a\" }\n", "services.web.build.args.1X", `invalid build argument name "1X": names are [A-Za-z_][A-Za-z0-9_]*`},
		{"remote context", "name = \"blog\"\n[services.web.build]\ncontext = \"https://example.com/repo.git\"\n", "services.web.build.context", `context "https://example.com/repo.git": a remote (URL or git) context is not supported; give a directory on this machine`},
		{"unknown build key", "name = \"blog\"\n[services.web.build]\ncontext = \".\"\nssh = \"default\"\n", "services.web.build.ssh", `unknown key "ssh": want one of context, dockerfile, args, target, labels`},
		{"image with build is a tag", "name = \"blog\"\n[services.web]\nimage = \"blog@sha256:" + strings.Repeat("a", 64) + "\"\n[services.web.build]\ncontext = \".\"\n", "services.web.build", `a built image is tagged with image, and "blog@sha256:` + strings.Repeat("a", 64) + `" is a digest: give a tag (name:tag) or remove image`},
	})
	spec, err := Parse("app.toml", []byte("name = \"blog\"\n[services.web.build]\ncontext = \"web\"\ndockerfile = \"./docker/Dockerfile\"\ntarget = \"prod\"\nargs = { VERSION = \"3\" }\nlabels = { team = \"a\" }\n"))
	if err != nil {
		t.Fatal(err)
	}
	b := spec.Services[0].Build
	if spec.Services[0].Image != "" || b == nil || b.Context != "web" || b.Dockerfile != "docker/Dockerfile" || b.Target != "prod" || b.Args["VERSION"] != "3" || b.Labels["team"] != "a" {
		t.Fatalf("build not mapped: image %q, build %+v", spec.Services[0].Image, b)
	}
}

// TestManifest_WithBuiltImages: the manifest a build leaves names the built
// image and has no build table (no build argument goes further), and it
// still validates.
func TestManifest_WithBuiltImages(t *testing.T) {
	in := "name = \"blog\"\n[services.web.build]\ncontext = \"web\"\nargs = { TOKEN = \"s3cret\" }\n[services.db]\nimage = \"postgres:16\"\n"
	out, err := WithBuiltImages([]byte(in), map[string]string{"web": "gordon/blog-web:0123456789abcdef"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "s3cret") || strings.Contains(string(out), "build") {
		t.Fatalf("build left in the manifest:\n%s", out)
	}
	spec, err := Parse("app.toml", out)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Services[1].Image != "gordon/blog-web:0123456789abcdef" || spec.Services[1].Build != nil || spec.Services[0].Image != "postgres:16" {
		t.Fatalf("services: %+v", spec.Services)
	}
}

// TestManifest_Registry: registry = "host[:port]/prefix" names a registry
// host and a repository prefix (built images are pushed there).
func TestManifest_Registry(t *testing.T) {
	const want = `want "host[:port]/prefix", e.g. "registry.example.com/shop" or "127.0.0.1:5000/team"`
	for _, bad := range []string{"shop", "registry.example.com", "registry.example.com/", "team/shop", "Registry.example.com/Shop"} {
		checkRefusals(t, []refusalCase{{"registry " + bad, "name = \"blog\"\nregistry = \"" + bad + "\"\n[services.web]\nimage = \"blog:1\"\n", "registry", `invalid registry "` + bad + `": ` + want}})
	}
	for _, good := range []string{"registry.example.com/shop", "127.0.0.1:5000/team/sub", "localhost/x"} {
		spec, err := Parse("app.toml", []byte("name = \"blog\"\nregistry = \""+good+"\"\n[services.web]\nimage = \"blog:1\"\n"))
		if err != nil || spec.Registry != good {
			t.Fatalf("registry %q: %v, %q", good, err, spec.Registry)
		}
	}
}

// On a swarm: node = "<hostname or ID>" pins a service to a swarm
// node; it reaches the spec as written.
func TestManifest_NodePinsAServiceToASwarmNode(t *testing.T) {
	spec, err := Parse("app.toml", []byte(base+"node = \"gsr-n2\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := spec.Services[0].Node; got != "gsr-n2" {
		t.Fatalf("node = %q, want gsr-n2", got)
	}
}
