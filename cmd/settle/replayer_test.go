package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/settlehq/settle/analyst"
	"github.com/settlehq/settle/internal/kafkatest"
	"github.com/settlehq/settle/internal/testnet"
	"github.com/settlehq/settle/settle/inspect"
	"github.com/settlehq/settle/settle/message"
)

// TestPageReplaysDeadLetters: the analysts' page of a running `settle run`
// replays dead letters through the service's own producer. The dry run
// lists them and produces nothing; the confirmed replay produces each to
// its source topic, the service's consumer settles them, and the
// coordinates the replay reports for each dead letter are where its record
// was consumed from (the producer's results come in acknowledgement order,
// not argument order, across partitions).
func TestPageReplaysDeadLetters(t *testing.T) {
	t.Parallel()
	d := newAnalystDB(t)
	const n = 8
	var ins []message.Input
	for i := range n {
		// Keys of different subjects: the records spread over the partitions.
		subject := fmt.Sprintf("cust-%d", i)
		ins = append(ins, message.Input{Topic: "usage", Partition: 0, Offset: 1000 + int64(i), Key: []byte("acme/" + subject),
			Value: opsRecord(fmt.Sprintf("r-%d", i), "subject", subject), Exhausted: &message.Exhausted{Err: "timeout", Attempts: 5}})
	}
	d.settle(t, ins...)
	dead, err := inspect.New(d.store).DeadLetters(context.Background(), inspect.DeadLetterFilter{})
	if err != nil || len(dead) != n {
		t.Fatalf("dead letters: %d, %v", len(dead), err)
	}
	broker := kafkatest.NewCluster(t, 4)
	defer broker.Close()
	admin := testnet.FreeAddr(t)
	out, _ := startService(t, "run", "--database-url", d.url, "--brokers", strings.Join(broker.ListenAddrs(), ","),
		"--admin-addr", admin, "--session-timeout", "1s", "--backoff-max", "200ms", "--shutdown-timeout", "10s", "--admin-time-zone", "Europe/Paris")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("service log:\n%s", out.String())
		}
	})
	testnet.WaitFor(t, "/livez 200", 30*time.Second, func() bool { c, _ := testnet.HTTPGet("http://" + admin + "/livez"); return c == 200 })
	s := &adminService{admin: admin, db: d}

	q := url.Values{}
	for _, dl := range dead {
		q.Add("id", itoa(dl.ID))
	}
	code, body := s.do(t, "GET", "/dlq/replay?"+q.Encode(), "", "")
	if code != 200 || strings.Count(body, `<input type="hidden" name="id"`) != n || !strings.Contains(body, `id="confirm-replay"`) ||
		!strings.Contains(body, `title="local: `) {
		t.Fatalf("dry run: %d\n%s", code, body)
	}
	time.Sleep(300 * time.Millisecond) // what a dry run might have produced would be consumed by now
	if e, _ := inspect.New(d.store).Explain(context.Background(), "acme", "2026-11", "r-0"); len(e.Operations) != 0 {
		t.Fatalf("the dry run settled something: %+v", e.Operations)
	}

	code, body = s.do(t, "POST", "/api/dlq/replay", "", `{"ids":[`+strings.Join(q["id"], ",")+`]}`,
		"Content-Type", "application/json", "Sec-Fetch-Site", "same-origin")
	var res analyst.ReplayResult
	if code != 200 || json.Unmarshal([]byte(body), &res) != nil || len(res.Replayed) != n {
		t.Fatalf("replay: %d %s", code, body)
	}
	partitions := map[int32]bool{}
	for i, r := range res.Replayed {
		if r.ID != dead[i].ID || r.To == nil || r.To.Topic != "usage" {
			t.Fatalf("replayed[%d] = %+v, want dead letter %d to usage", i, r, dead[i].ID)
		}
		partitions[r.To.Partition] = true
		rec := fmt.Sprintf("r-%d", i)
		var e *inspect.Explanation
		testnet.WaitFor(t, rec+" settled", 20*time.Second, func() bool {
			e, _ = inspect.New(d.store).Explain(context.Background(), "acme", "2026-11", rec)
			return e != nil && len(e.Operations) == 1 && e.Operations[0].Outcome == "settled"
		})

		if got := e.Operations[0].FirstDelivery; got != *r.To {
			t.Errorf("dead letter %d (%s): the replay said %+v, the record was consumed from %+v", r.ID, rec, *r.To, got)
		}
	}
	if len(partitions) < 2 {
		t.Errorf("the replays all went to partitions %v: the order check needs several", partitions)
	}
}
