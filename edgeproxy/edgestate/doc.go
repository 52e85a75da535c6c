// Package edgestate is how the edge proxy and its traffic backend
// (plugins/traffic/edge) share the files of <state>/edge: their names,
// WriteFileAtomic, how every one of them is written, and StateDirID, the
// identity of the state directory both sides compare (ARCHITECTURE §5).
// The types in those files are in core/routetable. It imports nothing
// of the project and serves no request.
package edgestate
