package dashboard

import (
	"bufio"
	"bytes"
	"math"
	"sort"
	"strconv"
	"strings"
)

// The edge's series the traffic figures come from (gordon-edge /metrics,
// Prometheus text format).
const (
	metricRequests = "gordon_edge_http_requests_total"
	metricDuration = "gordon_edge_http_request_duration_seconds_bucket"
)

// backendKey names one instance as the edge labels it.
type backendKey struct{ app, service, backend string }

// counts are one backend's cumulative counters at one sample: requests,
// 5xx responses, and the latency histogram's cumulative buckets (upper
// bound in seconds → requests at or under it), +Inf included.
type counts struct {
	requests, errors float64
	buckets          map[float64]float64
}

// parseMetrics reads the two series above from a Prometheus text
// exposition; every other line is skipped, and so is a line that does not
// parse (a partial read counts what it holds).
func parseMetrics(text []byte) map[backendKey]*counts {
	out := map[backendKey]*counts{}
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var name string
		switch {
		case strings.HasPrefix(line, metricRequests+"{"):
			name = metricRequests
		case strings.HasPrefix(line, metricDuration+"{"):
			name = metricDuration
		default:
			continue
		}
		labels, rest, ok := parseLabels(line[len(name)+1:])
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		k := backendKey{labels["app"], labels["service"], labels["backend"]}
		c := out[k]
		if c == nil {
			c = &counts{buckets: map[float64]float64{}}
			out[k] = c
		}
		if name == metricRequests {
			c.requests += v
			if labels["code"] == "5xx" {
				c.errors += v
			}
			continue
		}
		le, err := strconv.ParseFloat(labels["le"], 64)
		if err != nil {
			continue
		}
		c.buckets[le] = v
	}
	return out
}

// parseLabels reads `k="v",...}` and returns the labels and what follows
// the closing brace. Values may hold \" \\ and \n escapes.
func parseLabels(s string) (map[string]string, string, bool) {
	labels := map[string]string{}
	for {
		s = strings.TrimLeft(s, ", ")
		if strings.HasPrefix(s, "}") {
			return labels, s[1:], true
		}
		eq := strings.Index(s, "=\"")
		if eq <= 0 {
			return nil, "", false
		}
		key := s[:eq]
		s = s[eq+2:]
		var b strings.Builder
		i := 0
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					b.WriteByte('\n')
				default:
					b.WriteByte(s[i])
				}
				continue
			}
			b.WriteByte(s[i])
		}
		if i >= len(s) {
			return nil, "", false
		}
		labels[key] = b.String()
		s = s[i+1:]
	}
}

// quantile estimates the q quantile (0..1) in milliseconds from
// cumulative histogram bucket deltas, interpolating linearly within the
// bucket it falls in, as Prometheus' histogram_quantile does; 0 when the
// histogram is empty. A quantile in the +Inf bucket is the highest finite
// bound.
func quantile(q float64, buckets map[float64]float64) float64 {
	bounds := make([]float64, 0, len(buckets))
	for le := range buckets {
		bounds = append(bounds, le)
	}
	sort.Float64s(bounds)
	if len(bounds) == 0 {
		return 0
	}
	total := buckets[bounds[len(bounds)-1]]
	if total <= 0 {
		return 0
	}
	rank := q * total
	prevBound, prevCount := 0.0, 0.0
	for _, le := range bounds {
		c := buckets[le]
		if c >= rank {
			if math.IsInf(le, 1) {
				return prevBound * 1000
			}
			if c == prevCount {
				return le * 1000
			}
			return (prevBound + (le-prevBound)*(rank-prevCount)/(c-prevCount)) * 1000
		}
		prevBound, prevCount = le, c
	}
	return prevBound * 1000
}
