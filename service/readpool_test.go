package service

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/consumer"
	"github.com/settlehq/settle/internal/kafkatest"
	"github.com/settlehq/settle/internal/testnet"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/message"
	"github.com/settlehq/settle/settle/settletest"
)

// TestAnalystsFloodLeavesSettlingItsConnections: 16 analysts looping on
// /api/cases?limit=1000 (3,000 cases) while records arrive. The analysts'
// reads run over the read pool (2 connections) and never on the settling
// pool: sampled from pg_stat_activity by application_name, no queue query
// ever runs on a settling connection and at most 2 run at all; reads
// beyond them are answered 503 with Retry-After, none fails otherwise; and
// every record produced during the flood is settled.
func TestAnalystsFloodLeavesSettlingItsConnections(t *testing.T) {
	t.Parallel()
	k := kafkatest.NewCluster(t, 2)
	url := settletest.NewDatabase(t)
	main := settletest.PoolOn(t, url+"&application_name=settle-main", 6)
	read := settletest.PoolOn(t, url+"&application_name=settle-read", 2)
	probe := settletest.PoolOn(t, url, 1)
	store := settletest.StoreOn(t, main, settle.Config{})
	seedCases(t, store, 3000)

	s, err := New(Config{Store: store, ReadPool: read, Brokers: k.Brokers, AdminAddr: "127.0.0.1:0",
		Consumer: consumer.Config{SessionTimeout: time.Second}, ShutdownTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	admin := "http://" + s.AdminAddr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	testnet.WaitFor(t, "/readyz 200", 20*time.Second, func() bool { c, _ := testnet.HTTPGet(admin + "/readyz"); return c == 200 })

	flood, stopFlood := context.WithCancel(context.Background())
	var ok, busy, other atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for flood.Err() == nil {
				req, _ := http.NewRequestWithContext(flood, "GET", admin+"/api/cases?limit=1000&status=all", nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					continue // the flood's end
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch {
				case resp.StatusCode == 200:
					ok.Add(1)
				case resp.StatusCode == 503 && resp.Header.Get("Retry-After") != "":
					busy.Add(1)
				default:
					other.Add(1)
				}
			}
		})
	}
	// Where the queue's query runs, sampled while the flood goes on.
	var onMain, onReadMax int
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for flood.Err() == nil {
			var m, r int
			err := probe.QueryRow(context.Background(), `SELECT
				count(*) FILTER (WHERE application_name = 'settle-main'),
				count(*) FILTER (WHERE application_name = 'settle-read')
				FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' AND query LIKE '%ConflictCaseList%'`).Scan(&m, &r)
			if err == nil {
				onMain, onReadMax = onMain+m, max(onReadMax, r)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()

	time.Sleep(500 * time.Millisecond) // the flood is on
	const records = 200
	for i := range records {
		k.Produce(t, &kgo.Record{Topic: "usage", Key: []byte("acme/cust-2"), Value: []byte(fmt.Sprintf(`{"tenant_id":"acme","account_period":"2026-11",`+
			`"record_id":"flood-%d","kind":"grant","subject":"cust-2","amount":"1","currency":"USD","occurred_at":"2026-11-02T10:00:00Z"}`, i))})
	}
	start := time.Now()
	testnet.WaitFor(t, "the records produced during the flood settled", 30*time.Second, func() bool {
		return s.Counts()[message.OutcomeSettled] >= records
	})
	settledIn := time.Since(start)
	time.Sleep(300 * time.Millisecond)
	stopFlood()
	wg.Wait()
	<-sampled
	t.Logf("flood: %d answered, %d busy; %d records settled in %s; queue queries seen on the settling pool %d, on the read pool at most %d at once",
		ok.Load(), busy.Load(), records, settledIn, onMain, onReadMax)
	if onMain > 0 {
		t.Errorf("the analysts' queue query ran on the settling pool's connections (%d samples)", onMain)
	}
	if onReadMax > 2 {
		t.Errorf("%d queue queries at once on a read pool of 2", onReadMax)
	}
	if ok.Load() == 0 || busy.Load() == 0 || other.Load() > 0 {
		t.Errorf("flood answers: %d 200, %d 503 with Retry-After, %d other: want some of each of the first two and no other", ok.Load(), busy.Load(), other.Load())
	}
}

// seedCases settles n pairs of conflicting records: n open cases.
func seedCases(t *testing.T, s *settle.Store, n int) {
	t.Helper()
	rec := func(i int, amount string) []byte {
		return []byte(fmt.Sprintf(`{"tenant_id":"acme","account_period":"2026-11","record_id":"u-%d","kind":"usage","subject":"cust-1",`+
			`"amount":"%s","currency":"USD","meter":"m","quantity":"1","unit":"s","occurred_at":"2026-11-03T10:00:00Z","finalization_version":1}`, i, amount))
	}
	ins := []message.Input{{Value: []byte(`{"tenant_id":"acme","account_period":"2026-11","record_id":"g-0","kind":"grant","subject":"cust-1",` +
		`"amount":"1000000","currency":"USD","occurred_at":"2026-11-03T10:00:00Z"}`)}}
	for _, amount := range []string{"1", "2"} {
		for i := range n {
			ins = append(ins, message.Input{Value: rec(i, amount)})
		}
	}
	for i := range ins {
		ins[i].Topic, ins[i].Partition, ins[i].Offset = "seed", 0, int64(i)
	}
	for len(ins) > 0 {
		b := ins[:min(len(ins), 1000)]
		ins = ins[len(b):]
		if _, err := s.Settle(context.Background(), "seed", s.Decode(b)); err != nil {
			t.Fatal(err)
		}
	}
}
