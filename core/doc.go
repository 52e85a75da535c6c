// Package core is the contract of docker gordon (ARCHITECTURE §2, §4): the
// closed set of error classes, the Runtime, Prober, Traffic and Store
// interfaces with their optional extensions, the spec and record types they
// carry (ServiceSpec, ContainerSpec, records, labels, durations), the
// registry-auth context and the depends_on graph. Backend plugins and the
// plugin SDK compile against this package only; the engine that drives the
// backends is core/engine. It imports no project package but
// core/routetable (the route graph the Traffic interface carries, which the
// edge proxy reads); nothing in core imports the edge.
package core
