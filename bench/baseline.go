package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/settlehq/settle/fingerprint"
	"github.com/settlehq/settle/internal/workload"
	"github.com/settlehq/settle/record"
)

// baselineRecord is one input record decoded as the baselines need it.
type baselineRecord struct {
	id        record.Identity
	fp        int64
	canonical []byte
	response  []byte
	account   string
	amount    string
	key       []byte
	isNew     bool
}

// decodeForBaseline decodes, canonicalises and hashes a record as settle
// does, and builds a response of the same shape, so the baselines pay the
// same CPU per record before they write.
func decodeForBaseline(dec *record.Decoder, g *workload.Record) (baselineRecord, error) {
	rec, err := dec.Decode(g.Value, nil)
	if err != nil {
		return baselineRecord{}, err
	}
	canon := fingerprint.Canonical(&rec)
	amount := rec.Amount
	if amount == "" {
		amount = "0"
	}
	id := rec.Identity()
	resp, _ := json.Marshal(map[string]any{"version": 1, "outcome": "settled", "identity": id, "kind": rec.Kind,
		"subject": rec.Subject, "currency": rec.Currency, "entries": []map[string]string{{"bucket": "balance", "amount": "-" + amount}}})
	return baselineRecord{id: id, fp: int64(fingerprint.Sum(canon)), canonical: canon, response: resp,
		account: rec.TenantID + "/" + rec.Subject + "/" + rec.Currency, amount: amount, key: g.Key, isNew: g.New()}, nil
}

// liftMemoryLimit lifts the process's soft memory limit until the returned
// function puts it back. The baselines generate their whole workload before
// the clock starts, and 1,000,000 records are more than the service's 384
// MiB: under the limit the garbage collector ran through the whole run and
// doubled the COPY ceiling's client CPU per record (BENCHMARKS.md, "What
// each run measures").
func liftMemoryLimit() (restore func()) {
	old := debug.SetMemoryLimit(math.MaxInt64)
	return func() { debug.SetMemoryLimit(old) }
}

// baselineWriter is what each worker of a pooled baseline writes with.
type baselineWriter struct {
	pool          *pgxpool.Pool
	dec           *record.Decoder
	done, claimed atomic.Int64 // records written, identities claimed
}

// runPooled runs a baseline that writes through a pool of workers
// connections: the workload is generated and shared among the workers by
// partition (p % workers, as consumers would share it) before the clock
// starts, then each worker writes its records with write, metered. It
// fails unless the workers claimed exactly the workload's new identities,
// so a baseline cannot flatter itself by losing or doubling rows.
func (c *Config) runPooled(ctx context.Context, name string, w Workload, workers int,
	write func(ctx context.Context, bw *baselineWriter, recs []workload.Record) error) (RunResult, error) {
	defer liftMemoryLimit()()
	res := RunResult{Name: name}
	db, err := newDatabase(ctx, c.ServerURL, strings.ReplaceAll(name, "-", ""), c.Keep, c.HashPartitions)
	if err != nil {
		return res, err
	}
	defer db.drop()
	bw := &baselineWriter{}
	if bw.pool, err = db.pool(ctx, int32(workers)); err != nil {
		return res, err
	}
	defer bw.pool.Close()
	if bw.dec, err = record.NewDecoder(record.Config{}); err != nil {
		return res, err
	}
	gen, err := w.generator()
	if err != nil {
		return res, err
	}
	work := make([][]workload.Record, workers)
	for range w.Records {
		r := gen.Next()
		work[int(r.Partition)%workers] = append(work[int(r.Partition)%workers], r)
	}
	expectedNew := gen.Model().ExpectedIdentities()
	m, err := startMeter(ctx, c.ServerURL, db.name)
	if err != nil {
		return res, err
	}
	stop := c.progress(name, w.Records, bw.done.Load, nil)
	g, gctx := errgroup.WithContext(ctx)
	for _, recs := range work {
		g.Go(func() error { return write(gctx, bw, recs) })
	}
	err = g.Wait()
	stop()
	if err != nil {
		return res, fmt.Errorf("%s baseline: %w", name, err)
	}
	if err := m.stop(ctx, &res, w.Records); err != nil {
		return res, err
	}
	if claimed := bw.claimed.Load(); claimed != expectedNew {
		return res, fmt.Errorf("%s baseline claimed %d identities, the workload has %d new ones", name, claimed, expectedNew)
	}
	res.Notes = append(res.Notes, fmt.Sprintf("%d connections, %d identities claimed", workers, bw.claimed.Load()))
	return res, nil
}

// runPerRecord is the per-record transaction handler: for every record, one
// transaction that claims its identity with its response and, when new,
// writes its ledger row and its outbox row, on conns connections.
func (c *Config) runPerRecord(ctx context.Context, w Workload, conns int) (RunResult, error) {
	claim, ledger, outbox := mustSQL("baseline_identity_claim.sql"), mustSQL("baseline_ledger_insert.sql"), mustSQL("baseline_outbox_insert.sql")
	res, err := c.runPooled(ctx, "per-record", w, conns, func(ctx context.Context, bw *baselineWriter, recs []workload.Record) error {
		for _, gr := range recs {
			r, err := decodeForBaseline(bw.dec, &gr)
			if err != nil {
				return err
			}
			err = pgx.BeginTxFunc(ctx, bw.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
				var id int64
				err := tx.QueryRow(ctx, claim, r.id.TenantID, r.id.AccountPeriod, r.id.RecordID, string(r.id.Operation),
					r.fp, r.canonical, string(r.response)).Scan(&id)
				if errors.Is(err, pgx.ErrNoRows) {
					return nil // a repeat: nothing more to write
				}
				if err != nil {
					return err
				}
				bw.claimed.Add(1)
				if _, err := tx.Exec(ctx, ledger, id, r.account, "-"+r.amount); err != nil {
					return err
				}
				_, err = tx.Exec(ctx, outbox, "settlements", r.key, r.response)
				return err
			})
			if err != nil {
				return err
			}
			bw.done.Add(1)
		}
		return nil
	})
	res.Notes = append(res.Notes, "one transaction per record; no balances, chains or holds")
	return res, err
}

// runBatched is the batched handler the table measures: the same
// three rows, a batch of records per transaction (one statement: the
// identities claimed ON CONFLICT DO NOTHING, then the ledger and outbox
// rows of the ones claimed), on the core-only run's writers and partitions.
// It has none of settle's other rows and checks (deliveries, balances,
// chains, holds, conflicts, offsets): it shows what the rows alone cost
// when batched.
func (c *Config) runBatched(ctx context.Context, w Workload) (RunResult, error) {
	res, err := c.runPooled(ctx, "batched", w, c.Writers, func(ctx context.Context, bw *baselineWriter, recs []workload.Record) error {
		for start := 0; start < len(recs); start += c.BatchSize {
			part := recs[start:min(start+c.BatchSize, len(recs))]
			claimed, err := writeBatched(ctx, bw.pool, bw.dec, part)
			if err != nil {
				return err
			}
			bw.claimed.Add(claimed)
			bw.done.Add(int64(len(part)))
		}
		return nil
	})
	res.Notes = append(res.Notes, fmt.Sprintf("%d records per transaction; no deliveries, balances, chains, holds, conflicts or offsets", c.BatchSize))
	return res, err
}

var sqlBaselineBatch = mustSQL("baseline_batch_settle.sql")

// writeBatched decodes part as settle would and writes its three rows per
// new identity in one statement (one transaction); it returns how many
// identities it claimed.
func writeBatched(ctx context.Context, pool *pgxpool.Pool, dec *record.Decoder, part []workload.Record) (int64, error) {
	var (
		ts, ps, rs, ops, accounts, amounts []string
		fps                                []int64
		canon, keys                        [][]byte
		resps                              []string
		seen                               = make(map[record.Identity]bool, len(part))
	)
	for i := range part {
		r, err := decodeForBaseline(dec, &part[i])
		if err != nil {
			return 0, err
		}
		if seen[r.id] {
			continue // a repeat inside the batch: the first one claims
		}
		seen[r.id] = true
		ts, ps, rs, ops = append(ts, r.id.TenantID), append(ps, r.id.AccountPeriod), append(rs, r.id.RecordID), append(ops, string(r.id.Operation))
		fps, canon, resps = append(fps, r.fp), append(canon, r.canonical), append(resps, string(r.response))
		accounts, amounts, keys = append(accounts, r.account), append(amounts, "-"+r.amount), append(keys, r.key)
	}
	tag, err := pool.Exec(ctx, sqlBaselineBatch, ts, ps, rs, ops, fps, canon, resps, accounts, amounts, keys)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// runCopy is the ceiling: the same three rows per new identity written with
// COPY on one connection, 1,000 records per transaction, no keys and no
// checks. Its rate counts every input record (repeats included), like the
// other runs, so the ratios compare like with like.
func (c *Config) runCopy(ctx context.Context, w Workload) (RunResult, error) {
	defer liftMemoryLimit()()
	res := RunResult{Name: "copy-ceiling"}
	db, err := newDatabase(ctx, c.ServerURL, "copy", c.Keep, c.HashPartitions)
	if err != nil {
		return res, err
	}
	defer db.drop()
	conn, err := pgx.Connect(ctx, db.url)
	if err != nil {
		return res, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	dec, err := record.NewDecoder(record.Config{})
	if err != nil {
		return res, err
	}
	gen, err := w.generator()
	if err != nil {
		return res, err
	}
	gens := gen.Take(w.Records)
	m, err := startMeter(ctx, c.ServerURL, db.name)
	if err != nil {
		return res, err
	}
	var done atomic.Int64
	stop := c.progress("copy-ceiling", w.Records, done.Load, nil)
	defer stop()
	const chunk = 1000
	for start := 0; start < len(gens); start += chunk {
		part := gens[start:min(start+chunk, len(gens))]
		var ids, ledger, outbox [][]any
		for _, g := range part {
			if !g.New() {
				continue
			}
			r, err := decodeForBaseline(dec, &g)
			if err != nil {
				return res, err
			}
			ids = append(ids, []any{r.id.TenantID, r.id.AccountPeriod, r.id.RecordID, string(r.id.Operation), r.fp, r.canonical, string(r.response)})
			ledger = append(ledger, []any{r.id.RecordID, r.account, "-" + r.amount})
			outbox = append(outbox, []any{"settlements", r.key, r.response})
		}
		err := pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{}, func(tx pgx.Tx) error {
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{"ceil_identities"},
				[]string{"tenant_id", "account_period", "record_id", "operation", "fingerprint", "canonical", "response"}, pgx.CopyFromRows(ids)); err != nil {
				return err
			}
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{"ceil_ledger"}, []string{"record_id", "account", "amount"}, pgx.CopyFromRows(ledger)); err != nil {
				return err
			}
			_, err := tx.CopyFrom(ctx, pgx.Identifier{"ceil_outbox"}, []string{"topic", "key", "value"}, pgx.CopyFromRows(outbox))
			return err
		})
		if err != nil {
			return res, fmt.Errorf("copy ceiling at record %s: %w", strconv.Itoa(start), err)
		}
		done.Add(int64(len(part)))
	}
	if err := m.stop(ctx, &res, w.Records); err != nil {
		return res, err
	}
	res.Notes = append(res.Notes, "one connection, COPY of identity+ledger+outbox rows of the new identities, 1,000 records per transaction, no keys or checks")
	return res, nil
}
