package edgestate

// File names inside <state>/edge.
const (
	// RoutesFile is the route table (routetable.Table) the traffic
	// backend writes.
	RoutesFile = "routes.json"
	// StatusFile is the edge's routetable.Status, written by the edge.
	StatusFile = "status.json"
)
