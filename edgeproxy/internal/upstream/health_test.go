package upstream

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The ejection bound starts at Base, doubles on each ejection that follows
// within Max of the previous one's end, is capped at Max, and starts over
// after a quiet period longer than Max.
func TestR21_EjectionBoundDoublesUpToTheCap(t *testing.T) {
	h := Health{Base: 10 * time.Second, Max: 80 * time.Second}
	now := time.Now().UnixNano()
	var got []time.Duration
	for range 5 {
		until := h.Eject(now, EjectConnect)
		got = append(got, time.Duration(until-now))
		assert.True(t, h.Ejected(until-1))
		assert.False(t, h.Ejected(until), "readmitted at the bound")
		now = until + int64(time.Second)
	}
	assert.Equal(t, []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 80 * time.Second}, got)
	now += int64(81 * time.Second)
	assert.Equal(t, 10*time.Second, time.Duration(h.Eject(now, EjectReset)-now), "a quiet period resets the bound")
	assert.Equal(t, EjectReset, h.Reason())
}
