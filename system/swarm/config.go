// Package swarm is the swarm side of gordon's system services: the
// shared edge overlay, gordon-edge as a global Swarm service with
// host-mode ports, its image in a registry every node pulls from, and the
// swarm configuration the CLI and the backends read from the state
// directory (<state>/swarm.json).
//
// The file is written by `system start` on a swarm manager. Its presence
// is what selects the swarm runtime and the pushed route table: the CLI
// runs every engine verb in a runner container on the edge overlay, the
// runtime/swarm backend attaches every instance to that overlay, and the
// traffic/edge backend pushes each route table to every edge task over it.
package swarm

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/internal/durable"
)

// Names and defaults of the swarm edge.
const (
	// ConfigFile is the swarm configuration, relative to the state dir.
	ConfigFile = "swarm.json"
	// TokenFile holds the edge's route-push token (mode 0600), relative
	// to the state directory.
	TokenFile = "edge/swarm-token"
	// DefaultNetwork is the edge's control overlay (attachable): the edge
	// tasks, the runner and the reconcile container join it, no app
	// instance does. The admin, route-push and certificate-storage
	// endpoints listen only there.
	DefaultNetwork = "gordon-edge"
	// DefaultService is the edge's global Swarm service.
	DefaultService = "gordon-edge"
	// DefaultAdminPort is the edge tasks' admin port on the overlay (never
	// published).
	DefaultAdminPort = 9180
	// EdgeNodeLabel restricts the edge to nodes labelled
	// dev.gordon.edge=true when `system start --edge-nodes labelled`.
	EdgeNodeLabel = "dev.gordon.edge"
	// EnvEdgeNetwork tells runtime/swarm the edge's control overlay (set
	// by the CLI from Config.Network): no instance joins it.
	EnvEdgeNetwork = "GORDON_SWARM_EDGE_NETWORK"
	// EnvEdgeService tells runtime/swarm the edge's service, which joins
	// each app's overlay (set by the CLI from Config.Service).
	EnvEdgeService = "GORDON_SWARM_EDGE_SERVICE"
	// edgeRepo is the repository the edge image is pushed to, under the
	// configured registry.
	edgeRepo = "gordon-edge"
)

// Config is <state>/swarm.json.
type Config struct {
	Schema int `json:"schema"`
	// Network is the edge overlay; Service the edge's global service.
	Network string `json:"network"`
	Service string `json:"service"`
	// AdminPort is the edge tasks' admin port on Network.
	AdminPort int `json:"admin_port"`
	// ControlSubnet is Network's subnet (CIDR): the edge's admin address
	// and the certificate storage bind their address inside it only,
	// never one on an app's overlay.
	ControlSubnet string `json:"control_subnet,omitempty"`
	// Registry is host[:port][/path] the edge image is pushed to.
	Registry string `json:"registry"`
	// Image is the edge's pinned image (repo@sha256:…).
	Image string `json:"image,omitempty"`
	// ManagerNode is the node ID of the manager system start ran on: the
	// journal and the route table of record live there.
	ManagerNode string `json:"manager_node"`
	// HTTPPort and HTTPSPort are the host-mode ports every edge node
	// publishes (0: none).
	HTTPPort  int `json:"http_port"`
	HTTPSPort int `json:"https_port,omitempty"`
	// Labelled restricts the edge to nodes with EdgeNodeLabel=true.
	Labelled bool `json:"labelled,omitempty"`
	// StateID names this state directory on the swarm (16 hex digits,
	// made at its first system start): the edge service's
	// LabelStateOwner says which state directory drives the edges, and
	// the state configs say which wrote them (SPEC R80).
	StateID string `json:"state_id,omitempty"`
	// TCPPorts are the ports every edge node publishes for the apps' TCP
	// binds (system start --tcp-ports), sorted.
	TCPPorts []int `json:"tcp_ports,omitempty"`
	// ACME is the edge's certificate settings when HTTPSPort is set.
	ACME ACME `json:"acme,omitzero"`
	// Drain is the edge's --drain-timeout (0: its default), so another
	// manager adopting the edge (R80) keeps it.
	Drain time.Duration `json:"drain,omitempty"`
}

// ACME is what system start's ACME flags set on a swarm edge.
type ACME struct {
	Email string `json:"email,omitempty"`
	CA    string `json:"ca,omitempty"`
	// CARootConfig is the Docker config holding --acme-ca-root's PEM
	// (CARootConfigName), mounted read-only at CARootPath in every edge
	// task.
	CARootConfig string `json:"ca_root_config,omitempty"`
	// Off is --no-acme: serve only certificates added with certs add.
	Off bool `json:"off,omitempty"`
}

// Load reads <stateDir>/swarm.json. ok is false (and err nil) when the
// file does not exist: the state directory serves one engine. A file that
// does not parse wraps core.ErrInvalid.
func Load(stateDir string) (c Config, ok bool, err error) {
	data, err := os.ReadFile(filepath.Join(stateDir, ConfigFile))
	if errors.Is(err, os.ErrNotExist) {
		return Config{}, false, nil
	}
	if err != nil {
		return Config{}, false, fmt.Errorf("swarm configuration: %w: %w", core.ErrUnavailable, err)
	}
	if err := json.Unmarshal(data, &c); err != nil {
		return Config{}, false, fmt.Errorf("swarm configuration %s: %w: %w", filepath.Join(stateDir, ConfigFile), core.ErrInvalid, err)
	}
	c.defaults()
	return c, true, nil
}

// Present reports whether stateDir has a swarm configuration (one stat).
func Present(stateDir string) bool {
	_, err := os.Stat(filepath.Join(stateDir, ConfigFile))
	return err == nil
}

// Save writes c as <stateDir>/swarm.json atomically (mode 0644), its
// directory fsynced: its presence decides the runtime.
func Save(stateDir string, c Config) error {
	c.defaults()
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return fmt.Errorf("state directory %s: %w", stateDir, err)
	}
	return durable.WriteFile(filepath.Join(stateDir, ConfigFile), append(data, '\n'), 0o644)
}

func (c *Config) defaults() {
	if c.Schema == 0 {
		c.Schema = 1
	}
	if c.Network == "" {
		c.Network = DefaultNetwork
	}
	if c.Service == "" {
		c.Service = DefaultService
	}
	if c.AdminPort == 0 {
		c.AdminPort = DefaultAdminPort
	}
}

// Token reads the route-push token (<stateDir>/edge/swarm-token).
func Token(stateDir string) (string, error) {
	data, err := os.ReadFile(filepath.Join(stateDir, TokenFile))
	if err != nil {
		return "", fmt.Errorf("edge route-push token: %w: %w (run `docker gordon system start` on the swarm manager)", core.ErrUnavailable, err)
	}
	return strings.TrimSpace(string(data)), nil
}

// EnsureToken returns the route-push token, creating a random one (32
// bytes, hex) with mode 0600 when there is none.
func EnsureToken(stateDir string) (string, error) {
	if t, err := Token(stateDir); err == nil && t != "" {
		return t, nil
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	tok := hex.EncodeToString(b)
	path := filepath.Join(stateDir, TokenFile)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	if err := durable.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
		return "", err
	}
	return tok, nil
}
