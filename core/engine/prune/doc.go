// Package prune removes what docker gordon made on an engine and no longer
// needs (`docker gordon prune`), and names what it keeps on purpose.
//
// What it removes, per app this state directory knows:
//   - containers no record owns (neither ACTIVE, a marker, nor an unfinished
//     op names them: a superseded generation left behind, a candidate an
//     interrupted op left), and stopped containers of a superseded
//     generation whose retirement is still pending;
//   - images docker gordon built for the app (labelled dev.gordon.role=build)
//     that no container uses, ACTIVE does not run, DESIRED does not name,
//     and that are not among the newest KeepImages earlier images of their
//     service (the rollback targets);
//   - networks labelled for an incarnation of the app that ended in this
//     state directory (a removed app), when no container is attached;
//   - partial snapshots (a crash cut them off); complete ones are kept and
//     named (they go by their keep or by `snapshots rm`).
//
// What it never removes: a container ACTIVE names, running or stopped (a
// stopped or sleeping app keeps its serving generation), a named volume (it
// lists the volumes of removed apps with the command that deletes them),
// anything without docker gordon's labels, anything of an app this state
// directory does not know or of another incarnation (another state
// directory's app of the same name). An app whose latest operation did not
// finish is skipped: `docker gordon reconcile APP` finishes it first.
//
// A dry run lists exactly what the same run would remove, and changes
// nothing. Ops and revisions past the state directory's retention are
// dropped as after every operation (the app lock's release applies it).
package prune
