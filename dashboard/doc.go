// Package dashboard is `docker gordon dashboard`: a read-only web view of
// the apps, their instances, operations and traffic, served by the CLI in
// the foreground.
//
// It reads through the same access the CLI has. A Collector reads the
// journal (core.Store), the runtime's view through the engine's status,
// the edge's status, metrics and certificates through the traffic backend
// and system/, and the access log through a reader the CLI hands it, into
// one Snapshot. A Feed keeps the latest Snapshot: it collects again within
// a debounce of each journal write (it watches the journal's files) and
// at most once a second otherwise, and tells the subscribers. With a
// remote docker context the Feed runs in the runner on that engine
// (WriteFeed, one JSON Snapshot a line on the runner's output) and the
// CLI's Server reads it (ReadFeed): no port is opened on the server.
//
// The Server renders html/template pages embedded with go:embed; pages
// work without JavaScript, and a small hand-written script swaps the live
// part of a page when a server-sent event says the Snapshot changed.
// Every page names the CLI command of the next thing a user may do: the
// dashboard changes nothing.
package dashboard
