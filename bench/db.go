package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlehq/settle/internal/pgcluster"
	"github.com/settlehq/settle/settle/schema"
)

// database is one run's own database on the server.
type database struct {
	server string // admin URL
	name   string
	url    string
	keep   bool
}

var dbSeq atomic.Int64

// newDatabase creates a fresh, migrated database for one run.
func newDatabase(ctx context.Context, serverURL, run string, keep bool, hashPartitions int) (*database, error) {
	d, err := newEmptyDatabase(ctx, serverURL, run, keep)
	if err != nil {
		return nil, err
	}
	name := d.name
	conn, err := pgx.Connect(ctx, d.url)
	if err != nil {
		d.drop()
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := schema.Migrate(ctx, conn); err != nil {
		d.drop()
		return nil, fmt.Errorf("migrate %s: %w", name, err)
	}
	if hashPartitions > 0 {
		if err := schema.Partition(ctx, conn, hashPartitions); err != nil {
			d.drop()
			return nil, fmt.Errorf("partition %s: %w", name, err)
		}
	}
	if _, err := conn.Exec(ctx, mustSQL("baseline_schema.sql")); err != nil {
		d.drop()
		return nil, fmt.Errorf("baseline tables in %s: %w", name, err)
	}
	return d, nil
}

// newEmptyDatabase creates a fresh database without a schema, for a
// process that migrates it itself (an edge run's `settle run --owner-url`,
// whose binary may be an older release with an older schema).
func newEmptyDatabase(ctx context.Context, serverURL, run string, keep bool) (*database, error) {
	name := fmt.Sprintf("settle_bench_%s_%d_%d", run, os.Getpid(), dbSeq.Add(1))
	admin, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", serverURL, err)
	}
	defer admin.Close(context.WithoutCancel(ctx))
	if _, err := admin.Exec(ctx, `CREATE DATABASE `+name); err != nil {
		return nil, fmt.Errorf("create database %s: %w", name, err)
	}
	return &database{server: serverURL, name: name, url: pgcluster.WithDatabase(serverURL, name), keep: keep}, nil
}

// drop removes the database unless it is kept.
func (d *database) drop() {
	if d.keep {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := pgx.Connect(ctx, d.server)
	if err != nil {
		return
	}
	defer admin.Close(ctx)
	_, _ = admin.Exec(ctx, `DROP DATABASE IF EXISTS `+d.name+` WITH (FORCE)`)
}

func (d *database) pool(ctx context.Context, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(d.url)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = maxConns
	return pgxpool.NewWithConfig(ctx, cfg)
}

// serverSample is what the server has done so far: its WAL position and the
// CPU time of the processes that work for this run (the run database's
// backends and the server's background processes: WAL writer,
// checkpointer, background writer...).
type serverSample struct {
	lsn string
	cpu map[int]time.Duration // by pid
}

// sampleServer reads the WAL position and per-process CPU time. CPU comes
// from /proc, so it is only seen when PostgreSQL runs on this host as it
// does here; elsewhere it stays empty and the report says n/a.
func sampleServer(ctx context.Context, admin *pgx.Conn, dbName string) (serverSample, error) {
	s := serverSample{cpu: map[int]time.Duration{}}
	if err := admin.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&s.lsn); err != nil {
		return s, err
	}
	rows, err := admin.Query(ctx, `SELECT pid FROM pg_stat_activity
		WHERE datname = $1 OR backend_type NOT IN ('client backend', 'autovacuum worker', 'parallel worker')`, dbName)
	if err != nil {
		return s, err
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return s, err
	}
	for _, p := range pids {
		if d, ok := procCPU(int(p)); ok {
			s.cpu[int(p)] = d
		}
	}
	return s, nil
}

// serverDelta is the WAL bytes and CPU seconds between two samples.
func serverDelta(ctx context.Context, admin *pgx.Conn, a, b serverSample) (walBytes int64, cpu time.Duration, err error) {
	if err := admin.QueryRow(ctx, `SELECT pg_wal_lsn_diff($2::pg_lsn, $1::pg_lsn)::bigint`, a.lsn, b.lsn).Scan(&walBytes); err != nil {
		return 0, 0, err
	}
	for pid, t := range b.cpu {
		cpu += t - a.cpu[pid] // a process started during the run counts from zero
	}
	return walBytes, cpu, nil
}

// procCPU is the user+system CPU time of one process from /proc/PID/stat.
func procCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	// Fields after the command: state(0) ... utime(11) stime(12), in clock
	// ticks of 1/100 s (USER_HZ on Linux).
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond, true
}
