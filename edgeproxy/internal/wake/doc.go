// Package wake is the edge's side of scale to zero (SPEC R81): the board of
// the services a request or a connection asked to wake, served to the
// watcher by a long poll (GET /wakes on the admin address), coalesced so
// concurrent first requests ask once, and the wake metrics. It serves the
// held requests' seam: routing and the TCP relays ask, the watcher takes.
package wake
