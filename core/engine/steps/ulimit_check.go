package steps

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/gordon-deploy/docker-gordon/core"
)

// ulimitCheckEntrypoint is the entrypoint of the ulimit check container: a
// path no image has, so the container never runs anything. The engine
// applies the ulimits before it looks the entrypoint up, so the start
// fails either on a limit it cannot grant or on the missing file.
const ulimitCheckEntrypoint = "/.gordon-ulimit-check"

// rlimitTypeRe finds the resource number in the engine's error for a limit
// it could not set ("error setting rlimit type 7: operation not permitted").
var rlimitTypeRe = regexp.MustCompile(`rlimit type (\d+)`)

// rlimitNames are Linux's RLIMIT_* numbers by Docker's ulimit name.
var rlimitNames = map[int]string{0: "cpu", 1: "fsize", 2: "data", 3: "stack", 4: "core", 5: "rss", 6: "nproc",
	7: "nofile", 8: "memlock", 9: "as", 10: "locks", 11: "sigpending", 12: "msgqueue", 13: "nice", 14: "rtprio", 15: "rttime"}

// checkUlimits is R13's ulimit check for service s with the pinned image
// img: it asks the engine itself whether it can grant the declared ulimits,
// with a short-lived container of img that carries them and an entrypoint
// no image has, started on the host network and removed at once. The
// engine sets the limits before it looks the entrypoint up, so a start
// that fails setting a limit means no container of s could start (an
// engine without CAP_SYS_RESOURCE cannot go beyond its own hard limits,
// none beyond the kernel's fs.nr_open for nofile). Nothing of the app is
// touched. Services without ulimits cost nothing; a result is remembered
// per image and limits for the engine's lifetime.
//
// Errors: ErrInvalid naming the limit and the engine's message. A check
// that cannot be run (create failed, another start error) is no refusal.
func (e *Engine) CheckUlimits(ctx context.Context, app string, s *core.ServiceSpec, img core.ImageRef) error {
	limits := s.Container.Ulimits
	if len(limits) == 0 {
		return nil
	}
	key := img.Ref + "\x00" + ulimitsString(limits)
	e.PinMu.Lock()
	cached, seen := e.ulimitChecks[key]
	e.PinMu.Unlock()
	if seen {
		return cached
	}
	err := e.probeUlimits(ctx, app, s, img)
	if ctx.Err() != nil {
		return nil // interrupted: the deploy stops on its own context
	}
	e.PinMu.Lock()
	if e.ulimitChecks == nil {
		e.ulimitChecks = map[string]error{}
	}
	e.ulimitChecks[key] = err
	e.PinMu.Unlock()
	return err
}

// probeUlimits runs the check container of checkUlimits.
func (e *Engine) probeUlimits(ctx context.Context, app string, s *core.ServiceSpec, img core.ImageRef) error {
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	cs := core.ContainerSpec{
		Name:        fmt.Sprintf("gordon-%s-%s-ulimit-check-%s", app, s.Name, hex.EncodeToString(suffix)),
		Image:       img.Ref,
		Entrypoint:  []string{ulimitCheckEntrypoint},
		HostNetwork: true,
		Options:     core.ContainerOptions{Ulimits: s.Container.Ulimits},
		Labels: map[string]string{core.LabelManaged: "true", core.LabelApp: app, core.LabelService: s.Name,
			core.LabelRole: "check"},
	}
	id, err := e.Runtime.CreateContainer(ctx, cs)
	if err != nil {
		e.Log().Debug("ulimit check not run", "app", app, "service", s.Name, "error", err)
		return nil
	}
	serr := e.Runtime.StartContainer(ctx, id)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CleanupTimeout)
	if rerr := e.Runtime.RemoveContainer(cctx, id, true); rerr != nil && !errors.Is(rerr, core.ErrNotFound) {
		e.Log().Warn("remove the ulimit check container", "container", id, "error", rerr)
	}
	cancel()
	if serr == nil || !strings.Contains(serr.Error(), "rlimit") {
		return nil
	}
	return fmt.Errorf("%w: %s: the engine cannot grant it (it cannot raise a limit above its own hard limit, nor nofile above the kernel's fs.nr_open); lower services.%s.ulimits. Engine: %s",
		core.ErrInvalid, ulimitCulprit(serr.Error(), s.Container.Ulimits), s.Name, engineReason(serr.Error()))
}

// ulimitCulprit names the limit the engine's message points at ("ulimit
// nofile soft 1024 hard 2000000"), else every declared one.
func ulimitCulprit(msg string, limits []core.Ulimit) string {
	if m := rlimitTypeRe.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		for _, u := range limits {
			if u.Name == rlimitNames[n] {
				return fmt.Sprintf("ulimit %s (soft %d, hard %d)", u.Name, u.Soft, u.Hard)
			}
		}
	}
	return "ulimits " + ulimitsString(limits)
}

// engineReason is the tail of the engine's message from "error setting
// rlimit" on (the OCI runtime's preamble dropped).
func engineReason(msg string) string {
	if i := strings.Index(msg, "error setting rlimit"); i >= 0 {
		return strings.TrimSuffix(strings.TrimSpace(msg[i:]), ": unknown")
	}
	return msg
}

// ulimitsString is "name=soft:hard" of each limit, comma-separated.
func ulimitsString(limits []core.Ulimit) string {
	parts := make([]string, 0, len(limits))
	for _, u := range limits {
		parts = append(parts, fmt.Sprintf("%s=%d:%d", u.Name, u.Soft, u.Hard))
	}
	return strings.Join(parts, ",")
}
