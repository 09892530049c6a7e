// Package settle is the settling transaction: it takes a batch of input
// records, and in one PostgreSQL transaction claims each record's scoped
// identity, applies its effect at most once, and stores the response, the
// ledger rows, the rows a repeat or a conflict needs and the outbox rows
// together, with the consumer group's next offsets. Its statements are the
// files in sql/, run through the typed queries sqlc generates
// (settle/internal/db); the schema is settle/schema.
//
// This package decides: a record's outcome (handle.go), the effect of a new
// identity on accounts, chains and holds (ops.go), the sweeps' and the
// resolutions' work, each in the one frame of a settling transaction with
// its retries (batch.go). What an attempt knows, how it is loaded and how
// the rows its decisions stage are written is settle/internal/state; the
// decisions run a few statements of their own (a conflict case opened at
// once, the sweeps' pages, a resolution's case).
//
// With its rooms it is the only code that speaks SQL to settle's tables:
// settle/inspect and settle/reconcile read what the transaction wrote,
// settle/retention prunes operational history. The stores around it sit
// beside their users, each with its own generated queries (sqlc.yaml):
// relay/outbox is the relay's side of the outbox, edge/idempotency and
// edge/webhook/deliveries keep the HTTP edge's rows (the Idempotency-Keys
// claimed in it, the webhook deliveries after it); settle/schema says
// which owner owns each table. A room asks this
// package, through an exported method, for what only the transaction
// writes (OpenConflictCase). It never talks to Kafka: callers (the
// consumer, the HTTP edge, the analyst tools) hand it records and publish
// what it returns or what it leaves in the outbox.
package settle

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/settlehq/settle/internal/pgq"
	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle/internal/db"
	"github.com/settlehq/settle/settle/internal/state"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/schema"
)

// Config configures a Store. The zero value of every field is a documented
// default.
type Config struct {
	// Decoder configures input validation (record size, tenant list).
	Decoder record.Config

	// BatchRecordsMax caps the records of one Settle call. 0 = 1,000: beyond
	// that a transaction gains little and holds its locks longer.
	BatchRecordsMax int

	// ContentionRetriesMax caps how often one batch is retried after
	// serialization failures, deadlocks or a concurrent claim of the same
	// identity. Contention never counts against a record. 0 = 100.
	ContentionRetriesMax int

	// SettlementsTopic names the topic settlements are relayed to.
	// "" = "settlements".
	SettlementsTopic string

	// ResultsTopic names the topic that gets the final result of a record
	// that waited (through the outbox). "" = "usage.results".
	ResultsTopic string

	// DeadLetterTopic names the topic dead letters are relayed to.
	// "" = "usage.dlq".
	DeadLetterTopic string

	// DeadLetterValueBytesMax caps the original value a dead-letter message
	// carries to the dead-letter topic. A larger one goes without its value
	// and with header message.DeadLetterValueTruncatedHeader (its length): a message
	// over the broker's limit (max.message.bytes, about 1 MB by default)
	// would be refused. The full bytes stay in the dead_letters table
	// (settle dlq show, replay). 0 = DeadLetterValueBytesMaxDefault.
	DeadLetterValueBytesMax int
}

// DeadLetterValueBytesMaxDefault is the default DeadLetterValueBytesMax:
// well under the broker's default message limit, leaving room for the key
// and headers.
const DeadLetterValueBytesMaxDefault = 256 << 10

func (c *Config) setDefaults() {
	if c.BatchRecordsMax == 0 {
		c.BatchRecordsMax = 1000
	}
	if c.ContentionRetriesMax == 0 {
		c.ContentionRetriesMax = 100
	}
	if c.SettlementsTopic == "" {
		c.SettlementsTopic = message.TopicSettlements
	}
	if c.ResultsTopic == "" {
		c.ResultsTopic = message.TopicResults
	}
	if c.DeadLetterTopic == "" {
		c.DeadLetterTopic = message.TopicDeadLetters
	}
	if c.DeadLetterValueBytesMax == 0 {
		c.DeadLetterValueBytesMax = DeadLetterValueBytesMaxDefault
	}
}

// Validate reports the first setting that cannot work, saying how to fix it.
func (c Config) Validate() error {
	if c.BatchRecordsMax < 0 || c.BatchRecordsMax > 100_000 {
		return fmt.Errorf("batch records max %d: must be between 1 and 100000 (0 = 1000)", c.BatchRecordsMax)
	}
	if c.ContentionRetriesMax < 0 {
		return fmt.Errorf("contention retries max %d: must be positive (0 = 100)", c.ContentionRetriesMax)
	}
	if c.DeadLetterValueBytesMax < 0 {
		return fmt.Errorf("dead letter value bytes max %d: must be positive (0 = %d)", c.DeadLetterValueBytesMax, DeadLetterValueBytesMaxDefault)
	}
	return c.Decoder.Validate()
}

// Store settles batches against one PostgreSQL database.
type Store struct {
	pool *pgxpool.Pool
	cfg  Config
	now  func() time.Time

	// shared is what the store's transactions share: the accounts, offsets
	// and settlements its commits left it knowing, and its decoder
	// (settle/internal/state).
	shared *state.Shared

	// outboxSignal holds a wake-up for this process's relay once a
	// transaction that wrote outbox rows has committed (OutboxWritten).
	outboxSignal chan struct{}
}

// OutboxWritten receives after a transaction of this store that wrote
// outbox rows has committed; one receive stands for any number of them. A
// relay in this process waits on it between rounds instead of sleeping out
// its poll interval; rows written by other processes are found by polling.
func (s *Store) OutboxWritten() <-chan struct{} { return s.outboxSignal }

// commit sends p, the last pipeline of a transaction that wrote st (State.Write),
// with the transaction's COMMIT, keeps its settlements for the relay
// (WrittenMessage), and signals OutboxWritten if it wrote outbox rows.
func (s *Store) commit(ctx context.Context, tx *pgq.Tx, st *state.State, p *pgq.Pipeline) error {
	p.Commit(tx)
	var written []db.OutboxSettlementsInsertRow
	var err error
	if st.OutboxWritten != nil {
		written, err = pgq.Rows(st.OutboxWritten.Query) // sends the pipeline
	}
	if serr := p.Send(ctx); err == nil {
		err = serr
	}
	if err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil { // committed by the pipeline: gives the connection back
		return err
	}
	s.shared.Written.Keep(st, written)
	if len(st.Outbox) > 0 {
		select {
		case s.outboxSignal <- struct{}{}:
		default:
		}
	}
	return nil
}

// Open returns a Store over pool after checking that the database schema is
// the one this binary needs (see schema.Check).
func Open(ctx context.Context, pool *pgxpool.Pool, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	dec, err := record.NewDecoder(cfg.Decoder)
	if err != nil {
		return nil, err
	}
	if err := schema.Check(ctx, pool); err != nil {
		return nil, err
	}
	if err := db.CheckIDBlocks(ctx, pool); err != nil {
		return nil, err
	}
	shared := &state.Shared{Decoder: dec, SettlementsTopic: cfg.SettlementsTopic}
	return &Store{pool: pool, cfg: cfg, now: time.Now, shared: shared, outboxSignal: make(chan struct{}, 1)}, nil
}

// Decoder returns the store's decoder (its Config.Decoder).
func (s *Store) Decoder() *record.Decoder { return s.shared.Decoder }

// Pool returns the connection pool the store uses.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Config returns the store's configuration with defaults filled in.
func (s *Store) Config() Config { return s.cfg }

// WrittenRow is an outbox row this process wrote, as the relay's read of the tables gives it.
type WrittenRow = state.WrittenRow

// WrittenMessage returns the outbox row id as the relay's read of the
// tables would give it, if this process wrote it (a settlement) and still
// keeps it.
func (s *Store) WrittenMessage(id int64) (WrittenRow, bool) {
	return s.shared.Written.Message(id)
}

// ForgetWritten lets go of outbox rows ids: the relay published or parked
// them.
func (s *Store) ForgetWritten(ids []int64) { s.shared.Written.Forget(ids) }
