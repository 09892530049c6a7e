package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// RunResult is what one run measured.
type RunResult struct {
	Name    string  `json:"name"`
	Records int     `json:"records"`
	Seconds float64 `json:"seconds"`
	// RecordsPerSec counts input records (duplicates and conflicts
	// included) per second of wall time.
	RecordsPerSec float64 `json:"records_per_sec"`
	// CPU seconds per 1,000 records: the bench process (getrusage of self)
	// and PostgreSQL (the run database's backends plus the server's
	// background processes, from /proc).
	ServiceCPUPer1k float64 `json:"service_cpu_s_per_1k"`
	PGCPUPer1k      float64 `json:"postgres_cpu_s_per_1k"`
	// HostIdleShare is the share of the host's CPU time (all cores) that
	// went unused during the run: idle or waiting for I/O (/proc/stat),
	// whoever used the rest. A run bound by the cores leaves little; one
	// bound by waits (round trips, commits) leaves more.
	HostIdleShare  float64          `json:"host_idle_share"`
	PeakRSSBytes   int64            `json:"peak_rss_bytes,omitempty"`
	WALBytesPerRec float64          `json:"wal_bytes_per_record"`
	Latency        *Latency         `json:"latency,omitempty"`
	Outcomes       map[string]int64 `json:"outcomes,omitempty"`
	Checks         *Checks          `json:"checks,omitempty"`
	Notes          []string         `json:"notes,omitempty"`
}

// meter measures one run: wall time, this process's CPU, the server's CPU
// and WAL.
type meter struct {
	admin *pgx.Conn
	db    string
	s0    serverSample
	cpu0  time.Duration
	t0    time.Time
	// the host's idle and total CPU ticks at the start (hostCPU)
	idle0, total0 uint64
}

func startMeter(ctx context.Context, serverURL, db string) (*meter, error) {
	admin, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return nil, err
	}
	m := &meter{admin: admin, db: db}
	if m.s0, err = sampleServer(ctx, admin, db); err != nil {
		admin.Close(ctx)
		return nil, err
	}
	m.cpu0, m.t0 = selfCPU(), time.Now()
	m.idle0, m.total0 = hostCPU()
	return m, nil
}

// stop fills in r's rates for records input records.
func (m *meter) stop(ctx context.Context, r *RunResult, records int) error {
	wall := time.Since(m.t0)
	cpu := selfCPU() - m.cpu0
	if idle, total := hostCPU(); total > m.total0 && idle >= m.idle0 {
		r.HostIdleShare = float64(idle-m.idle0) / float64(total-m.total0)
	}
	defer m.admin.Close(context.WithoutCancel(ctx))
	s1, err := sampleServer(ctx, m.admin, m.db)
	if err != nil {
		return fmt.Errorf("sample server: %w", err)
	}
	wal, pgCPU, err := serverDelta(ctx, m.admin, m.s0, s1)
	if err != nil {
		return err
	}
	r.Records, r.Seconds = records, wall.Seconds()
	if records > 0 {
		k := float64(records) / 1000
		r.RecordsPerSec = float64(records) / wall.Seconds()
		r.ServiceCPUPer1k = cpu.Seconds() / k
		r.PGCPUPer1k = pgCPU.Seconds() / k
		r.WALBytesPerRec = float64(wal) / float64(records)
	}
	return nil
}
