package journal

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/gordon-deploy/docker-gordon/core"
)

// fuzzLoad writes data as the record at rel and calls load: it must not
// panic and must return a record or a *CorruptError (never ErrNotFound:
// the file exists).
func fuzzLoad(f *testing.F, rel string, load func(s *Store) error) {
	s, err := Open(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	p := filepath.Join(s.Dir(), rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		err := load(s)
		if err == nil {
			return
		}
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.Path != p {
			t.Fatalf("want nil or *CorruptError naming %s, got %v", p, err)
		}
		if errors.Is(err, core.ErrNotFound) {
			t.Fatalf("corrupt record reported as not found: %v", err)
		}
	})
}

// FuzzLoadActive: arbitrary bytes in active.json (decision 1).
func FuzzLoadActive(f *testing.F) {
	f.Add([]byte(`{"app":"blog","services":{},"converged":true}`))
	fuzzLoad(f, "apps/blog/active.json", func(s *Store) error {
		a, err := s.LoadActive(context.Background(), "blog")
		if err == nil && (a.App != "blog" || a.Services == nil) {
			return errors.New("loaded ACTIVE without app or services map")
		}
		return err
	})
}

// FuzzLoadOp: arbitrary bytes in an op journal.
func FuzzLoadOp(f *testing.F) {
	f.Add([]byte(`{"id":"op-1","app":"blog","kind":"deploy","steps":[]}`))
	fuzzLoad(f, "apps/blog/ops/op-1.json", func(s *Store) error {
		op, err := s.LoadOp(context.Background(), "blog", "op-1")
		if err == nil && (op.ID != "op-1" || op.App != "blog") {
			return errors.New("loaded op with the wrong identity")
		}
		return err
	})
}

// FuzzLoadMarkers: arbitrary bytes in markers.json; loaded markers are
// sorted (decision 6).
func FuzzLoadMarkers(f *testing.F) {
	f.Add([]byte(`[{"app":"blog","service":"web","container":"c1","reason":"retirement-pending","created_at":"2026-09-10T12:00:00Z"}]`))
	fuzzLoad(f, "apps/blog/markers.json", func(s *Store) error {
		ms, err := s.LoadMarkers(context.Background(), "blog")
		if err != nil {
			return err
		}
		for i := 1; i < len(ms); i++ {
			if ms[i].CreatedAt.Before(ms[i-1].CreatedAt) {
				return errors.New("markers out of order")
			}
		}
		return nil
	})
}
