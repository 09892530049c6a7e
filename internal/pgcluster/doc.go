// Package pgcluster runs a private, throwaway PostgreSQL cluster.
//
// It exists for two callers:
//
//   - `settle dev`, which should work on a laptop with PostgreSQL installed
//     but not running (no service to configure, no password to set), and
//   - tests that restart PostgreSQL, crash it or kill its backends. Doing that
//     to a shared server would break every other test running against it, so
//     such tests get a cluster of their own.
//
// A cluster is a fresh initdb'd data directory plus a postmaster that is a
// child of the calling process. It trusts every local connection, so it must
// never hold data anyone cares about, and by default it only listens on a
// unix socket inside its own directory, so nothing else on the machine can
// reach it by accident.
//
// PostgreSQL refuses to run as root. When the caller is root (CI containers,
// the dev VM) the server programs run as the "postgres" system user and the
// cluster directory is chowned to it; otherwise they run as the caller.
//
// Callers must call Stop: the postmaster is a separate process and the
// temporary directory holds a whole data directory, so forgetting Stop leaks
// both. Tests should register it right away:
//
//	c, err := pgcluster.Start(ctx, pgcluster.Options{})
//	if err != nil {
//		t.Fatal(err)
//	}
//	t.Cleanup(func() { _ = c.Stop() })
//
// As a last line of defence on Linux the postmaster is asked to shut down
// (immediate mode) when the process that started it dies, so a test binary
// killed by a timeout does not leave servers behind; the directory is still
// leaked in that case.
package pgcluster
