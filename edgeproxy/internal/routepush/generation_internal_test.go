package routepush

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

// countingEdge counts the tables written.
type countingEdge struct{ writes atomic.Int32 }

func (e *countingEdge) Publish(context.Context, []byte) (bool, error) {
	e.writes.Add(1)
	return true, nil
}
func (*countingEdge) Status() routetable.Status { return routetable.Status{} }

// R79 (generations): a peer's table far ahead of the applied generation
// is not adopted, and a later table in sequence from a peer still is.
func TestPeerTableFarAheadIsNotAdopted(t *testing.T) {
	var gen atomic.Uint64
	gen.Store(math.MaxUint64)
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"schema":1,"generation":` + strconv.FormatUint(gen.Load(), 10) + `}`))
	}))
	defer peer.Close()
	edge := &countingEdge{}
	p := New(Config{Token: "t", Peers: "peers", AdminAddr: func() string { return "127.0.0.1:1" },
		Lookup: func(context.Context, string) ([]string, error) {
			return []string{strings.TrimPrefix(peer.URL, "http://")}, nil
		}}, edge)
	p.SetApplied(routetable.Table{Schema: 1, Generation: 7})

	p.syncPeers(context.Background())
	assert.Zero(t, edge.writes.Load(), "a table at 2^64-1 is not written")

	gen.Store(8)
	p.syncPeers(context.Background())
	assert.Equal(t, int32(1), edge.writes.Load(), "the next table in sequence is adopted")
}
