package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// devDatabaseMarker is the comment settle dev gives the database it
// creates: it drops a database only when it reads this back, so a
// database of the user's that happens to bear the name is never touched.
const devDatabaseMarker = "settle dev sandbox: each settle dev on it drops it and creates it again empty"

// devLockKey is the session advisory lock a running sandbox holds in its
// database (advisory locks are scoped to a database, so one key serves
// every sandbox name). The service's own advisory locks take two keys, or
// the migrations' one-key constant: none is this one.
const devLockKey = 0x5e771e

// sqlStateObjectInUse is what DROP DATABASE without FORCE answers while
// other sessions are connected to the database.
const sqlStateObjectInUse = "55006"

// devDatabase is the sandbox's database, claimed: lock is the session that
// holds the sandbox's lock in it until Close.
type devDatabase struct {
	cfg   *pgx.ConnConfig // the sandbox database
	lock  *pgx.Conn
	fresh bool // it did not exist before
}

// Close releases the sandbox's lock (by ending its session); the database
// stays, for the next settle dev to recreate.
func (d *devDatabase) Close(ctx context.Context) {
	_ = d.lock.Close(context.WithoutCancel(ctx)) // the server releases a session's locks when it ends
}

// claimDatabase makes the dev database empty on server and locks it for
// this process. It drops only a database settle dev created (it carries
// devDatabaseMarker) and that no other sandbox holds, and drops it without
// FORCE: a session still connected to it (a psql, a sandbox that lost its
// lock) makes the drop fail, and the database stays as it was.
func (c *devCmd) claimDatabase(ctx context.Context, server *pgx.ConnConfig) (*devDatabase, error) {
	if !validDatabaseName(c.Database) {
		return nil, usageError{fmt.Sprintf("--database %q: use lowercase letters, digits and _", c.Database)}
	}
	// Not on the dev database itself (DATABASE_URL exported as the hints
	// say names it): a session cannot drop its own database.
	acfg := server.Copy()
	if acfg.Database == c.Database || acfg.Database == "" {
		acfg.Database = "postgres"
	}
	admin, err := pgx.ConnectConfig(ctx, acfg)
	if err != nil {
		return nil, err
	}
	defer admin.Close(context.WithoutCancel(ctx))
	db := &devDatabase{cfg: server.Copy()}
	db.cfg.Database = c.Database
	// The lock's session says whose it is: a second sandbox names this
	// process when it finds the lock taken.
	lockCfg := db.cfg.Copy()
	if lockCfg.RuntimeParams == nil {
		lockCfg.RuntimeParams = map[string]string{}
	}
	lockCfg.RuntimeParams["application_name"] = fmt.Sprintf("settle dev (pid %d)", os.Getpid())

	var marker *string
	err = admin.QueryRow(ctx, `SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1`, c.Database).Scan(&marker)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		db.fresh = true
	case err != nil:
		return nil, fmt.Errorf("look up database %s: %w", c.Database, err)
	case marker == nil || *marker != devDatabaseMarker:
		return nil, usageError{fmt.Sprintf("database %s exists on %s and settle dev did not create it (it does not carry settle dev's comment): "+
			"it is left as it is. Start the sandbox on another database with --database %s, or, if it is a sandbox an older settle dev made, "+
			"drop it yourself (DROP DATABASE %s) and start again", c.Database, serverName(server), c.otherDatabase(), c.Database)}
	default:
		// Ours: free unless another sandbox holds its lock.
		lock, err := c.lockDatabase(ctx, lockCfg)
		if err != nil {
			return nil, err
		}
		_ = lock.Close(ctx) // the drop below needs every session gone, this one too
		if _, err := admin.Exec(ctx, `DROP DATABASE `+c.Database); err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == sqlStateObjectInUse {
				return nil, usageError{fmt.Sprintf("database %s has other sessions (%s), and settle dev drops its database only when nobody uses it: "+
					"close them, or start the sandbox on another database with --database %s", c.Database, sessionsOn(ctx, admin, c.Database), c.otherDatabase())}
			}
			return nil, fmt.Errorf("drop database %s: %w", c.Database, err)
		}
	}
	if _, err := admin.Exec(ctx, `CREATE DATABASE `+c.Database); err != nil {
		return nil, fmt.Errorf("create database %s: %w (the user needs CREATEDB)", c.Database, err)
	}
	// An unmarked database would be refused by the next settle dev: drop it
	// while it is still empty and nobody else knows it.
	if _, err := admin.Exec(ctx, `COMMENT ON DATABASE `+c.Database+` IS '`+devDatabaseMarker+`'`); err != nil {
		_, _ = admin.Exec(ctx, `DROP DATABASE `+c.Database) // made a moment ago by this process; the comment's error is the one to report
		return nil, fmt.Errorf("mark database %s as settle dev's: %w", c.Database, err)
	}
	if db.lock, err = c.lockDatabase(ctx, lockCfg); err != nil {
		return nil, err
	}
	return db, nil
}

// lockDatabase opens the lock's session on the sandbox database and takes
// its lock, or says which process holds it.
func (c *devCmd) lockDatabase(ctx context.Context, cfg *pgx.ConnConfig) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to database %s: %w", c.Database, err)
	}
	var locked bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, int64(devLockKey)).Scan(&locked); err != nil {
		_ = conn.Close(ctx) // the query's error is the one to report
		return nil, fmt.Errorf("lock database %s: %w", c.Database, err)
	}
	if locked {
		return conn, nil
	}
	holder := "another process"
	var name string
	var since string
	// A 64-bit advisory key shows in pg_locks as classid (high half) and
	// objid (low half), objsubid 1.
	if conn.QueryRow(ctx, `SELECT a.application_name, to_char(a.backend_start, 'YYYY-MM-DD HH24:MI:SS TZ')
		FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 AND l.classid = 0 AND l.objid = $1
		  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`, int64(devLockKey)).Scan(&name, &since) == nil && name != "" {
		holder = fmt.Sprintf("%s, since %s", name, since)
	}
	_ = conn.Close(ctx) // refused: nothing was changed
	return nil, usageError{fmt.Sprintf("database %s is in use by another settle dev (%s): it is left as it is. "+
		"Stop that one (Ctrl-C), or start this one on another database with --database %s", c.Database, holder, c.otherDatabase())}
}

// sessionsOn lists who is connected to database db, for the refusal.
func sessionsOn(ctx context.Context, admin *pgx.Conn, db string) string {
	rows, err := admin.Query(ctx, `SELECT pid, coalesce(nullif(application_name, ''), 'no application_name'), coalesce(usename, '')
		FROM pg_stat_activity WHERE datname = $1 ORDER BY pid`, db)
	if err != nil {
		return "unknown: " + err.Error()
	}
	var out []string
	for rows.Next() {
		var pid int32
		var app, user string
		if rows.Scan(&pid, &app, &user) == nil {
			out = append(out, fmt.Sprintf("server pid %d: %s, user %s", pid, app, user))
		}
	}
	if rows.Err() != nil || len(out) == 0 {
		return "they may have left since"
	}
	return strings.Join(out, "; ")
}

// otherDatabase is a name to suggest instead of --database.
func (c *devCmd) otherDatabase() string {
	if len(c.Database) > 61 {
		return "settle_dev_2"
	}
	return c.Database + "_2"
}

// serverName is the server of cfg, for messages (no password).
func serverName(cfg *pgx.ConnConfig) string {
	return fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)
}
