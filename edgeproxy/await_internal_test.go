package edgeproxy

import (
	"testing"
	"time"
)

// awaitSignal waits (10 s at most) for a value on ch: an event the code
// under observation reports, such as a request reaching a backend.
func awaitSignal[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting: %s", what)
		var zero T
		return zero
	}
}
