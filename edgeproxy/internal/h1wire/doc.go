// Package h1wire is the HTTP/1.1 wire format of the edge's own loops: it
// reads and parses request heads from clients (ParseRequest: the plain
// bodiless GET and HEAD requests the loops serve themselves; anything else
// is reported as not served, and the caller hands it to net/http) and
// response heads from backends (ParseResponse, ParseChunkSize,
// ValidTrailer), and classifies header names (HeaderKind: hop-by-hop,
// forwarding, client claims, underscore aliases).
//
// It serves no request and imports nothing of the project (test/arch holds
// that). Parsed values slice into the caller's head buffer and are valid
// until it is reused; nothing here allocates per request, except a
// Connection header naming 16 or more headers (a set). Both
// parsers are fuzzed against net/http (FuzzParseRequest in internal/handoff,
// FuzzParseResponse here).
package h1wire
