package swarm

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/internal/dockererr"
	"github.com/gordon-deploy/docker-gordon/internal/durable"
)

// The state mirror (SPEC R80): the reconcile loop on the manager keeps,
// per app, one Docker config holding what another manager needs to take
// the app over: its identity, DESIRED, ACTIVE, intent, ownership,
// recovery, markers and the revisions those name. Swarm replicates
// configs over its raft store to every manager, so the state survives the
// loss of the manager whose state directory held it.
const (
	// LabelState marks a state config; its value is the app.
	LabelState = "dev.gordon.state"
	// LabelStateHash is the sha256 (hex, 16) of the bundle's files.
	LabelStateHash = "dev.gordon.state-hash"
	// LabelStateNode is the node ID of the manager that wrote it.
	LabelStateNode = "dev.gordon.state-node"
	// LabelStateAt is when it was written (RFC 3339, UTC).
	LabelStateAt = "dev.gordon.state-at"
	// LabelStateOwner is the StateID of the state directory that wrote a
	// state config, and, on the edge service, of the one that drives
	// the edges.
	LabelStateOwner = "dev.gordon.state-owner"

	bundleSchema = 1
	// maxBundle bounds a compressed bundle (a Docker config holds 500 KB).
	maxBundle = 450 << 10
)

// appStateFiles are the per-app records a bundle carries (journal
// layout); revisions/<id>.json of the revisions they name are added.
var appStateFiles = []string{"app.json", "desired.json", "active.json", "intent.json", "ownership.json", "recovery.json", "markers.json"}

// bundleFileName is every name a bundle may carry (an adopted bundle with
// any other name is refused: nothing is written outside the app's
// directory).
var bundleFileName = regexp.MustCompile(`^(app|desired|active|intent|ownership|recovery|markers)\.json$|^revisions/[A-Za-z0-9][A-Za-z0-9._-]{0,127}\.json$`)

// appName is an app name (a DNS label, as the manifest requires): a state
// config labelled otherwise is never adopted, so its files cannot land
// outside apps/.
var appName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Bundle is one app's adoptable state: Files maps a path relative to
// apps/<app>/ to the record's bytes.
type Bundle struct {
	Schema int               `json:"schema"`
	App    string            `json:"app"`
	Node   string            `json:"node"`
	At     time.Time         `json:"at"`
	Files  map[string][]byte `json:"files"`
}

// Hash is the sha256 of the files (names and contents), hex, 16 digits:
// the LabelStateHash of the config that holds them.
func (b Bundle) Hash() string {
	names := make([]string, 0, len(b.Files))
	for n := range b.Files {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(b.Files[n]))
		h.Write(b.Files[n])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// ReadBundle reads app's records from stateDir. ok is false when the app
// has no incarnation here (never deployed, or removed: app.json absent).
func ReadBundle(stateDir, app string) (b Bundle, ok bool, err error) {
	dir := filepath.Join(stateDir, "apps", app)
	b = Bundle{Schema: bundleSchema, App: app, Files: map[string][]byte{}}
	for _, name := range appStateFiles {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return Bundle{}, false, fmt.Errorf("app %s: read %s: %w", app, name, err)
		}
		b.Files[name] = data
	}
	if b.Files["app.json"] == nil {
		return Bundle{}, false, nil
	}
	for _, id := range namedRevisions(b.Files) {
		name := "revisions/" + id + ".json"
		if !bundleFileName.MatchString(name) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return Bundle{}, false, fmt.Errorf("app %s: read %s: %w", app, name, err)
		}
		b.Files[name] = data
	}
	return b, true, nil
}

// namedRevisions are the revision IDs DESIRED and ACTIVE name.
func namedRevisions(files map[string][]byte) []string {
	ids := map[string]bool{}
	var desired struct {
		Revision string `json:"revision"`
	}
	if json.Unmarshal(files["desired.json"], &desired) == nil {
		ids[desired.Revision] = true
	}
	var active core.Active
	if json.Unmarshal(files["active.json"], &active) == nil {
		ids[active.ConvergedRevision] = true
		for _, s := range active.Services {
			if s != nil {
				ids[s.EffectiveRevision] = true
			}
		}
	}
	delete(ids, "")
	out := make([]string, 0, len(ids))
	for id := range ids {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// encodeBundle is b as gzipped JSON, sealed with key (nil: not sealed).
func encodeBundle(b Bundle, key []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := json.NewEncoder(zw).Encode(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	if buf.Len() > maxBundle {
		return nil, fmt.Errorf("app %s: its state is %d bytes compressed, more than a Docker config holds (%d): %w", b.App, buf.Len(), maxBundle, core.ErrInvalid)
	}
	if key == nil {
		return buf.Bytes(), nil
	}
	return seal(key, buf.Bytes())
}

// decodeBundle opens data (sealed with key, or not sealed) and decodes it.
func decodeBundle(data, key []byte) (Bundle, error) {
	data, err := unseal(key, data)
	if err != nil {
		return Bundle{}, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return Bundle{}, err
	}
	var b Bundle
	if err := json.NewDecoder(io.LimitReader(zr, 16<<20)).Decode(&b); err != nil {
		return Bundle{}, err
	}
	if b.Schema != bundleSchema {
		return Bundle{}, fmt.Errorf("state schema %d, this build reads %d: %w", b.Schema, bundleSchema, core.ErrConflict)
	}
	for name := range b.Files {
		if !bundleFileName.MatchString(name) {
			return Bundle{}, fmt.Errorf("state file %q is not an app record: %w", name, core.ErrInvalid)
		}
	}
	return b, nil
}

// stateConfig is one state config as listed.
type stateConfig struct {
	ID, Name, App, Hash, Node, Owner, Enc string
	At                                    time.Time
}

func listStateConfigs(ctx context.Context, api client.APIClient) (map[string][]stateConfig, error) {
	res, err := api.ConfigList(ctx, client.ConfigListOptions{Filters: make(client.Filters).Add("label", LabelState)})
	if err != nil {
		return nil, fmt.Errorf("list the state configs: %w", dockererr.Classify(err))
	}
	out := map[string][]stateConfig{}
	for _, c := range res.Items {
		l := c.Spec.Labels
		at, _ := time.Parse(time.RFC3339Nano, l[LabelStateAt])
		sc := stateConfig{ID: c.ID, Name: c.Spec.Name, App: l[LabelState], Hash: l[LabelStateHash], Node: l[LabelStateNode], Owner: l[LabelStateOwner], Enc: l[LabelStateEnc], At: at}
		out[sc.App] = append(out[sc.App], sc)
	}
	for app := range out {
		sort.Slice(out[app], func(i, j int) bool { return out[app][i].At.After(out[app][j].At) })
	}
	return out, nil
}

// configName is gordon-state-<hash>-<owner[:8]>-<app>, cut to Docker's
// 64 characters (the labels carry the whole app name and owner). The
// owner is in it so an adopting state directory, whose records are
// byte for byte the old owner's, still writes a config of its own.
func configName(app, hash, owner string) string {
	if len(owner) > 8 {
		owner = owner[:8]
	}
	n := "gordon-state-" + hash + "-" + owner + "-" + app
	if len(n) > 64 {
		n = n[:64]
	}
	return n
}

// Mirror keeps one state config per app of a state directory (SPEC R80).
// It remembers what it wrote, so a pass over unchanged apps reads the
// records and makes no API call. Not safe for concurrent use.
type Mirror struct {
	API      client.APIClient
	StateDir string
	// Node is this manager's node ID (LabelStateNode); Owner this state
	// directory's StateID (LabelStateOwner).
	Node, Owner string
	// Now is the clock (default time.Now).
	Now func() time.Time
	// TryLock takes app's lock if it is free now, so a bundle is read
	// between operations, never in the middle of one (a deploy writes
	// ACTIVE, DESIRED and revisions in several steps); ok false skips
	// the app until a later Sync. nil reads without a lock.
	TryLock func(ctx context.Context, app string) (unlock func(), ok bool, err error)

	written map[string]string // app → hash of its current config
	system  string            // hash of swarm.json's current config
}

// Sync writes a new config for every app whose records changed since
// its config, then removes that app's older configs; an app this state
// directory removed loses its configs. Apps this state directory never
// had are left alone (another state directory's). Errors are joined.
func (m *Mirror) Sync(ctx context.Context) error {
	entries, err := os.ReadDir(filepath.Join(m.StateDir, "apps"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("state mirror: %w", err)
	}
	var errs []error
	var existing map[string][]stateConfig
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		app := e.Name()
		b, ok, err := m.read(ctx, app)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if b.App == "" && ok {
			continue // busy: a later pass reads it
		}
		hash := ""
		if ok {
			hash = b.Hash()
		}
		if w, seen := m.written[app]; seen && w == hash {
			continue
		}
		if existing == nil {
			if existing, err = listStateConfigs(ctx, m.API); err != nil {
				return errors.Join(append(errs, err)...)
			}
		}
		if err := m.syncApp(ctx, b, ok, hash, existing[app]); err != nil {
			errs = append(errs, err)
			continue
		}
		if m.written == nil {
			m.written = map[string]string{}
		}
		m.written[app] = hash
	}
	if err := m.syncSystem(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// read reads app's bundle under its lock (see TryLock). A busy app
// returns ok true and an empty bundle.
func (m *Mirror) read(ctx context.Context, app string) (Bundle, bool, error) {
	if m.TryLock == nil {
		return ReadBundle(m.StateDir, app)
	}
	unlock, ok, err := m.TryLock(ctx, app)
	if err != nil {
		return Bundle{}, false, fmt.Errorf("app %s: %w", app, err)
	}
	if !ok {
		return Bundle{}, true, nil
	}
	defer unlock()
	return ReadBundle(m.StateDir, app)
}

func (m *Mirror) syncApp(ctx context.Context, b Bundle, ok bool, hash string, have []stateConfig) error {
	keep := ""
	key := mirrorKey(m.StateDir)
	enc := ""
	if key != nil {
		enc = sealAESGCM
	}
	if ok {
		for _, c := range have {
			if c.Hash == hash && c.Owner == m.Owner && c.Enc == enc {
				keep = c.ID
				break
			}
		}
		if keep == "" {
			now := time.Now
			if m.Now != nil {
				now = m.Now
			}
			b.Node, b.At = m.Node, now().UTC()
			data, err := encodeBundle(b, key)
			if err != nil {
				return err
			}
			labels := map[string]string{labelManaged: "true", LabelState: b.App, LabelStateHash: hash,
				LabelStateNode: m.Node, LabelStateOwner: m.Owner, LabelStateAt: b.At.Format(time.RFC3339Nano)}
			if enc != "" {
				labels[LabelStateEnc] = enc
			}
			nameHash := hash
			if enc != "" {
				nameHash = "s" + hash[1:] // a sealed config's name differs from the unsealed one it replaces
			}
			res, err := m.API.ConfigCreate(ctx, client.ConfigCreateOptions{Spec: swarm.ConfigSpec{
				Annotations: swarm.Annotations{Name: configName(b.App, nameHash, m.Owner), Labels: labels}, Data: data}})
			if err != nil {
				// A config of that name exists (another pass wrote it and
				// was cut short): the next pass lists it and finishes.
				return fmt.Errorf("app %s: write its state config: %w", b.App, dockererr.Classify(err))
			}
			keep = res.ID
		}
	}
	var errs []error
	for _, c := range have {
		if c.ID == keep || (keep == "" && ok) {
			continue
		}
		if _, err := m.API.ConfigRemove(ctx, c.ID, client.ConfigRemoveOptions{}); err != nil && !errors.Is(dockererr.Classify(err), core.ErrNotFound) {
			errs = append(errs, fmt.Errorf("app %s: remove its old state config %s: %w", b.App, c.Name, dockererr.Classify(err)))
		}
	}
	return errors.Join(errs...)
}

// Adoptable is the newest state config of one app.
type Adoptable struct {
	App  string
	Node string // the manager that wrote it
	At   time.Time
	id   string
}

// ListAdoptable returns the newest state config of every app, by app.
func ListAdoptable(ctx context.Context, api client.APIClient) ([]Adoptable, error) {
	all, err := listStateConfigs(ctx, api)
	if err != nil {
		return nil, err
	}
	var out []Adoptable
	for app, cs := range all {
		if !appName.MatchString(app) || len(cs) == 0 {
			continue
		}
		out = append(out, Adoptable{App: app, Node: cs[0].Node, At: cs[0].At, id: cs[0].ID})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].App < out[j].App })
	return out, nil
}

// Fetch reads, opens (with key, the mirror key of the control record;
// a sealed config without it wraps ErrSealed) and decodes a's state
// config. A config that does not decode, names a file outside the app's
// records, or holds another app is core.ErrInvalid; a newer schema is
// core.ErrConflict.
func Fetch(ctx context.Context, api client.APIClient, a Adoptable, key []byte) (Bundle, error) {
	if !appName.MatchString(a.App) {
		return Bundle{}, fmt.Errorf("a state config names app %q, which is not an app name: %w", a.App, core.ErrInvalid)
	}
	res, err := api.ConfigInspect(ctx, a.id, client.ConfigInspectOptions{})
	if err != nil {
		return Bundle{}, fmt.Errorf("app %s: read its state config: %w", a.App, dockererr.Classify(err))
	}
	b, err := decodeBundle(res.Config.Spec.Data, key)
	if err != nil {
		return Bundle{}, fmt.Errorf("app %s: its state config %s: %w: %w", a.App, res.Config.Spec.Name, core.ErrInvalid, err)
	}
	if b.App != a.App {
		return Bundle{}, fmt.Errorf("app %s: its state config %s holds app %q: %w", a.App, res.Config.Spec.Name, b.App, core.ErrInvalid)
	}
	return b, nil
}

// Adopt fetches a's state config (Fetch) and writes its records into
// stateDir (WriteBundle).
func Adopt(ctx context.Context, api client.APIClient, stateDir string, a Adoptable) error {
	b, err := Fetch(ctx, api, a, mirrorKey(stateDir))
	if err != nil {
		return err
	}
	return WriteBundle(stateDir, b)
}

// WriteBundle writes b's records into stateDir/apps/<app>/: each file
// (mode 0600) into a private directory apps/.adopt-<app>-<random>, fsynced,
// which is then renamed into place and apps/ fsynced. So a failure part-way
// (ENOSPC, EIO, a crash) leaves no apps/<app>/ and the next system start
// adopts the app again; the leftover private directory is removed then.
// An app stateDir already has records of (apps/<app>/ present: held, or
// removed here) is refused with core.ErrConflict and nothing is written;
// so is an app name that is not one (core.ErrInvalid).
func WriteBundle(stateDir string, b Bundle) error {
	if !appName.MatchString(b.App) {
		return fmt.Errorf("app %q is not an app name: %w", b.App, core.ErrInvalid)
	}
	apps := filepath.Join(stateDir, "apps")
	dir := filepath.Join(apps, b.App)
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("app %s: this state directory already has records of it: %w", b.App, core.ErrConflict)
	}
	for n := range b.Files {
		if !bundleFileName.MatchString(n) {
			return fmt.Errorf("app %s: state file %q is not an app record: %w", b.App, n, core.ErrInvalid)
		}
	}
	if err := os.MkdirAll(apps, 0o700); err != nil {
		return fmt.Errorf("app %s: %w", b.App, err)
	}
	stale, _ := filepath.Glob(filepath.Join(apps, ".adopt-"+b.App+"-*"))
	for _, s := range stale {
		_ = os.RemoveAll(s) // a failed adoption's leftovers
	}
	tmp, err := os.MkdirTemp(apps, ".adopt-"+b.App+"-")
	if err != nil {
		return fmt.Errorf("app %s: %w", b.App, err)
	}
	defer os.RemoveAll(tmp) // nothing left once renamed
	if err := writeBundleFiles(tmp, b); err != nil {
		return fmt.Errorf("app %s: %w", b.App, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("app %s: %w", b.App, err)
	}
	return durable.SyncDir(apps)
}

// writeAdopted writes one adopted record (tests inject a failure).
var writeAdopted = durable.WriteFile

// writeBundleFiles writes b's files under dir, each durably, and fsyncs
// every directory it created.
func writeBundleFiles(dir string, b Bundle) error {
	names := make([]string, 0, len(b.Files))
	for n := range b.Files {
		names = append(names, n)
	}
	sort.Strings(names)
	dirs := map[string]bool{}
	for _, n := range names {
		p := filepath.Join(dir, filepath.FromSlash(n))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
		if err := writeAdopted(p, b.Files[n], 0o600); err != nil {
			return fmt.Errorf("write %s: %w", n, err)
		}
		for d := filepath.Dir(p); d != dir && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	for d := range dirs {
		if err := durable.SyncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return durable.SyncDir(dir)
}

// StateAge says how old a state config is, for messages ("12s ago").
func StateAge(at, now time.Time) string {
	if at.IsZero() {
		return "at an unknown time"
	}
	return now.Sub(at).Round(time.Second).String() + " ago"
}

// AdoptEdge reads a running edge service (another manager's system
// start) for a state directory that has no swarm configuration yet. It
// returns the registry its image was pushed to (host[:port][/path]) and
// its route-push token, which the new state directory keeps (WriteToken)
// so the edges go on accepting pushes and the service's spec stays the
// same. found is false when there is no such service.
func AdoptEdge(ctx context.Context, api client.APIClient, service string) (e RunningEdge, found bool, err error) {
	svc, found, err := inspectService(ctx, api, service)
	if err != nil || !found {
		return RunningEdge{}, false, err
	}
	if svc.Spec.Labels[labelManaged] != "true" || svc.Spec.Labels[labelSystem] != "edge" || svc.Spec.TaskTemplate.ContainerSpec == nil {
		return RunningEdge{}, false, nil
	}
	cs := svc.Spec.TaskTemplate.ContainerSpec
	e = RunningEdge{Image: cs.Image, Owner: svc.Spec.Labels[LabelStateOwner], OwnerNode: svc.Spec.Labels[LabelStateNode]}
	if ref, _, ok := strings.Cut(cs.Image, "@"); ok {
		if r, ok := strings.CutSuffix(ref, "/"+edgeRepo); ok {
			e.Registry = r
		}
	}
	for _, kv := range cs.Env {
		if tok, ok := strings.CutPrefix(kv, "GORDON_EDGE_ROUTES_TOKEN="); ok {
			e.Token = tok
		}
	}
	return e, true, nil
}

// RunningEdge is what AdoptEdge reads of a running edge service.
type RunningEdge struct {
	// Registry is where its image was pushed (host[:port][/path]).
	Registry string
	// Image is its pinned image; Token its route-push token.
	Image, Token string
	// Owner is the StateID of the state directory that drives it
	// ("" before R80); OwnerNode the node ID of that one's manager.
	Owner, OwnerNode string
}

// NewStateID returns a fresh StateID (16 hex digits).
func NewStateID() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// CheckOwner refuses (core.ErrConflict) a state directory the swarm's
// edge service names another owner for: another manager's system start
// took its apps over (R80), and a pass or a verb from here would push a
// stale route table to every edge and remove the new owner's instances.
// No edge service, or an owner label or StateID from before R80, passes.
func CheckOwner(ctx context.Context, api client.APIClient, cfg Config) error {
	if cfg.StateID == "" {
		return nil
	}
	e, found, err := AdoptEdge(ctx, api, cfg.Service)
	if err != nil {
		return err
	}
	if !found || e.Owner == "" || e.Owner == cfg.StateID {
		return nil
	}
	return fmt.Errorf("this state directory no longer drives the swarm: the edge service %s is driven by state directory %s on manager node %s, which took its apps over (system start there); run docker gordon against that manager (docker --context …), and stop this state directory's reconcile loop (docker gordon system stop here leaves the edge to its owner): %w",
		cfg.Service, e.Owner, e.OwnerNode, core.ErrConflict)
}

// WriteToken writes the route-push token to stateDir (mode 0600) unless
// stateDir already has one.
func WriteToken(stateDir, token string) error {
	if t, err := Token(stateDir); err == nil && t != "" {
		return nil
	}
	path := filepath.Join(stateDir, TokenFile)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return durable.WriteFile(path, []byte(token+"\n"), 0o600)
}
