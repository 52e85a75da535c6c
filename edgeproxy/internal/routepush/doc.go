// Package routepush is the route table pushed over the edge's admin
// endpoint, for an edge that cannot read the publisher's state directory
// (a global Swarm service: one edge task per node).
//
// It serves two admin requests, both only when the edge has a routes
// token and both authorized by "Authorization: Bearer <token>" (compared
// in constant time; anything else is 401 and changes nothing):
//   - PUT /routes: the body (at most MaxTableBytes, else 413) is a
//     routetable.Table document; the edge writes it as its own
//     <state>/edge/routes.json and applies it before answering, exactly as
//     POST /reload after a write (Edge.Publish). Answers: 200 with the
//     routetable.Status after the apply (a table the edge refuses shows in
//     error and rejected_generation, as for any table); 200 with the
//     status and nothing written when the generation equals the applied
//     one; 409 with the status when it is lower (an edge never goes back);
//     422 and nothing written when it is more than
//     routetable.MaxGenerationStep (2^32) above the applied one (0 before
//     any), so a table pushed at 2^64-1 cannot hold every later one off;
//     202 when the apply was queued but not seen within the reload bound;
//     400 when the body is not a JSON object with a generation; 500 when
//     routes.json cannot be written.
//   - GET /routes[?after=N]: the last table the edge applied, as JSON
//     (200); 404 when it applied none; 204 when its generation is ≤ N (a
//     cheap poll); 400 when N is not an unsigned integer.
//
// With Config.Peers set, RunPeers asks every other edge task named by
// that DNS name for a newer table (GET /routes?after=<applied>) every
// Config.Interval and adopts the newest one as a PUT would (a table far
// ahead is refused the same way, and not asked for again), so an edge
// task that (re)starts converges within about one interval. It serves no
// public request and imports nothing of the edge but core/routetable.
package routepush
