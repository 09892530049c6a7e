package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/settlehq/settle/internal/workload"
	"github.com/settlehq/settle/record"
)

// runPipeline is the bare pipeline: the end-to-end run's records on the same
// broker, read by a consumer group, each poll's records shared among the
// writers by partition (the consumer's lanes), decoded and hashed as settle
// does, and written as the batched baseline's three rows per new identity
// (one statement per transaction of BatchSize records); the group's offsets
// are committed to Kafka after the poll's transactions. It has none of
// settle's other rows, checks, results or outbox relay: it is what the
// machine does with the same broker and database for the least a pipeline
// must do. Like runPooled, it fails unless it claimed exactly the
// workload's new identities.
func (c *Config) runPipeline(ctx context.Context, w Workload) (RunResult, error) {
	defer liftMemoryLimit()()
	res := RunResult{Name: "pipeline"}
	b, err := startBroker(ctx, c.BrokerArgv, filepath.Join(c.OutDir, "broker.log"))
	if err != nil {
		return res, err
	}
	defer b.close()
	const topic = "usage-pipeline"
	db, err := newDatabase(ctx, c.ServerURL, "pipeline", c.Keep, c.HashPartitions)
	if err != nil {
		return res, err
	}
	defer db.drop()
	pool, err := db.pool(ctx, int32(c.Writers))
	if err != nil {
		return res, err
	}
	defer pool.Close()
	dec, err := record.NewDecoder(record.Config{})
	if err != nil {
		return res, err
	}
	expectedNew, err := preload(ctx, b.addrs, topic, w)
	if err != nil {
		return res, err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addrs...), kgo.ConsumerGroup("bench-pipeline"), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.FetchMaxBytes(64<<20))
	if err != nil {
		return res, err
	}
	defer cl.Close()
	m, err := startMeter(ctx, c.ServerURL, db.name)
	if err != nil {
		return res, err
	}
	var done, claimed atomic.Int64
	stop := c.progress("pipeline", w.Records, done.Load, nil)
	err = c.pipelinePolls(ctx, cl, pool, dec, int64(w.Records), &done, &claimed)
	stop()
	if err != nil {
		return res, fmt.Errorf("pipeline baseline: %w", err)
	}
	if err := m.stop(ctx, &res, w.Records); err != nil {
		return res, err
	}
	if claimed.Load() != expectedNew {
		return res, fmt.Errorf("pipeline baseline claimed %d identities, the workload has %d new ones", claimed.Load(), expectedNew)
	}
	res.Notes = append(res.Notes, fmt.Sprintf("%d writers, %d records per transaction, offsets committed after each poll's transactions; %d identities claimed",
		c.Writers, c.BatchSize, claimed.Load()))
	return res, nil
}

// preload creates topic with the workload's partitions and produces every
// record of w to it before the clock starts, as the end-to-end run does;
// it returns the workload's number of new identities.
func preload(ctx context.Context, brokers []string, topic string, w Workload) (int64, error) {
	prod, err := newProducer(brokers)
	if err != nil {
		return 0, err
	}
	defer prod.Close()
	if _, err := kadm.NewClient(prod).CreateTopic(ctx, int32(w.Partitions), 1, nil, topic); err != nil {
		return 0, fmt.Errorf("create topic %s: %w", topic, err)
	}
	gen, err := w.generator()
	if err != nil {
		return 0, err
	}
	var produceErr atomic.Pointer[error]
	for range w.Records {
		r := gen.Next()
		prod.Produce(ctx, &kgo.Record{Topic: topic, Partition: r.Partition, Key: r.Key, Value: r.Value}, func(_ *kgo.Record, err error) {
			if err != nil {
				produceErr.CompareAndSwap(nil, &err)
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		return 0, err
	}
	if e := produceErr.Load(); e != nil {
		return 0, fmt.Errorf("produce: %w", *e)
	}
	return gen.Model().ExpectedIdentities(), nil
}

// newProducer is the bench's producer of workload records: each record on
// the partition the workload gives it.
func newProducer(brokers []string) (*kgo.Client, error) {
	return kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MaxBufferedRecords(50_000), kgo.ProducerBatchMaxBytes(1<<20))
}

// pipelinePolls polls until total records are written: each poll's records
// go to the writers by partition, each writer writes its share in batches,
// and the poll's offsets are committed once every batch has.
func (c *Config) pipelinePolls(ctx context.Context, cl *kgo.Client, pool *pgxpool.Pool, dec *record.Decoder, total int64, done, claimed *atomic.Int64) error {
	for done.Load() < total {
		fs := cl.PollRecords(ctx, 50_000)
		if err := fs.Err0(); err != nil {
			return err
		}
		lanes := make([][]workload.Record, c.Writers)
		fs.EachRecord(func(r *kgo.Record) {
			i := int(r.Partition) % c.Writers
			lanes[i] = append(lanes[i], workload.Record{Key: r.Key, Value: r.Value})
		})
		g, gctx := errgroup.WithContext(ctx)
		for _, lane := range lanes {
			g.Go(func() error {
				for start := 0; start < len(lane); start += c.BatchSize {
					part := lane[start:min(start+c.BatchSize, len(lane))]
					n, err := writeBatched(gctx, pool, dec, part)
					if err != nil {
						return err
					}
					claimed.Add(n)
					done.Add(int64(len(part)))
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return err
		}
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			return fmt.Errorf("commit offsets: %w", err)
		}
	}
	return nil
}
