package journal

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"

	"github.com/gordon-deploy/docker-gordon/core"
)

// claims.json holds the loopback host-port claims of every app; writers of
// different apps share it, so read-modify-write runs under its own flock,
// claims.lock (waiting until ctx is done).
func (s *Store) claimsPath() string { return filepath.Join(s.dir, "claims.json") }

func (s *Store) withClaims(ctx context.Context, fn func([]core.Claim) []core.Claim) error {
	l, err := s.lockFile(ctx, filepath.Join(s.dir, "claims.lock"), "claims")
	if err != nil {
		return err
	}
	defer l.Unlock() //nolint:errcheck // release of a flock we hold
	cs, err := s.ListClaims(ctx)
	if err != nil {
		return err
	}
	out := fn(cs)
	sortClaims(out)
	return writeJSON(s.claimsPath(), out)
}

// RegisterClaims records claims, replacing any claim of the same port and
// protocol. Ports must be 1..65535 and protocol non-empty (core.ErrInvalid).
func (s *Store) RegisterClaims(ctx context.Context, claims []core.Claim) error {
	for _, c := range claims {
		if c.Port < 1 || c.Port > 65535 || c.Protocol == "" {
			return fmt.Errorf("%w: app %s container %s: claim of port %d/%q", core.ErrInvalid, c.App, c.Container, c.Port, c.Protocol)
		}
	}
	if len(claims) == 0 {
		return nil
	}
	return s.withClaims(ctx, func(cs []core.Claim) []core.Claim {
		out := cs[:0]
		for _, o := range cs {
			replaced := false
			for _, c := range claims {
				if o.Port == c.Port && o.Protocol == c.Protocol {
					replaced = true
					break
				}
			}
			if !replaced {
				out = append(out, o)
			}
		}
		return append(out, claims...)
	})
}

// ReleaseClaims drops every claim of (app, container); none is not an error.
func (s *Store) ReleaseClaims(ctx context.Context, app, container string) error {
	return s.withClaims(ctx, func(cs []core.Claim) []core.Claim {
		out := cs[:0]
		for _, o := range cs {
			if o.App != app || o.Container != container {
				out = append(out, o)
			}
		}
		return out
	})
}

// ListClaims returns every claim, sorted by port then protocol. None →
// empty.
func (s *Store) ListClaims(ctx context.Context) ([]core.Claim, error) {
	var cs []core.Claim
	err := readJSON(s.claimsPath(), &cs, '[', "claims")
	if errors.Is(err, core.ErrNotFound) {
		return []core.Claim{}, nil
	}
	if err != nil {
		return nil, err
	}
	if cs == nil {
		cs = []core.Claim{}
	}
	sortClaims(cs)
	return cs, nil
}

func sortClaims(cs []core.Claim) {
	sort.SliceStable(cs, func(i, j int) bool {
		if cs[i].Port != cs[j].Port {
			return cs[i].Port < cs[j].Port
		}
		return cs[i].Protocol < cs[j].Protocol
	})
}
