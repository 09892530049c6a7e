package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/settlehq/settle/edge/idempotency"
	"github.com/settlehq/settle/fingerprint"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/message"
)

// Group commit. A request that passed validation joins the queue; a
// committer takes whatever is queued (up to GroupRequestsMax requests and
// the store's batch of records) and commits the whole group in one
// settling transaction, which claims the keys, settles every claimed
// request's records and stores their answers (idempotency.Group rides
// settle.Store.SettleWith). While a group commits the next one gathers, so
// an idle edge adds no wait and a busy one pays one transaction per group.
// At most GroupsInFlightMax groups commit at once; a committer goroutine
// lives only while the queue holds requests.
//
// Each request keeps its own answer: claims are decided per key (replay,
// busy, mismatch answered to that request alone), and a settle that fails
// for one request's records is retried per request.

// pending is one validated request waiting for its group.
type pending struct {
	tenant, key string
	hash        []byte
	canon       [][]byte
	raws        []json.RawMessage
	recs        []*fingerprint.Decoded
	batch       bool
	takeOver    *idempotency.Claim // a key an earlier version left in progress

	answered bool
	done     chan outcome // buffered: the committer never waits for the handler
}

// outcome is what the committer decided for a request.
type outcome struct {
	claim   idempotency.Claim // replay, busy, mismatch: answered by the handler from it
	body    []byte            // the stored answer (200)
	aerr    *apiError         // answered instead of a body
	crashed bool              // tests: the simulated crash before the commit
}

func (p *pending) answer(o outcome) {
	if !p.answered {
		p.answered = true
		p.done <- o
	}
}

// committer gathers requests into groups and commits them.
type committer struct {
	api *API

	mu      sync.Mutex
	queue   []*pending
	running int  // committer goroutines
	timer   bool // a check for a waiting queue is set
}

// A committer beyond the first starts only for a queue that has gathered
// a quarter of a group, or that waited this long: a moderate load then
// stays in one committer's large groups (a transaction costs about the
// same for 5 requests as for 50), and a stalled group does not hold the
// queue back for long.
const committerSpillAfter = 10 * time.Millisecond

// queued is how many requests wait for a group (tests).
func (c *committer) queued() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue)
}

// submit queues p and waits for its outcome.
func (c *committer) submit(p *pending) outcome {
	p.done = make(chan outcome, 1)
	c.mu.Lock()
	c.queue = append(c.queue, p)
	c.startLocked(false)
	c.mu.Unlock()
	return <-p.done
}

// startLocked starts a committer for the queue if one may start now
// (spill: the queue waited committerSpillAfter), or sets the check that
// starts one when the queue still waits then. c.mu is held.
func (c *committer) startLocked(spill bool) {
	switch {
	case len(c.queue) == 0 || c.running >= c.api.cfg.GroupsInFlightMax:
	case c.running == 0 || spill || len(c.queue) >= max(1, c.api.cfg.GroupRequestsMax/4):
		c.running++
		go c.run()
	case !c.timer:
		c.timer = true
		time.AfterFunc(committerSpillAfter, func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.timer = false
			c.startLocked(true)
		})
	}
}

// run commits groups until the queue is empty.
func (c *committer) run() {
	for {
		g := c.take()
		if g == nil {
			return
		}
		c.commit(g)
	}
}

// take removes the next group from the queue: the requests in arrival
// order up to the caps. With none queued it returns nil, and the
// committer ends.
func (c *committer) take() []*pending {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) == 0 {
		c.running--
		return nil
	}
	n, recs := 0, 0
	for n < len(c.queue) && n < c.api.cfg.GroupRequestsMax {
		r := len(c.queue[n].recs)
		if n > 0 && recs+r > c.api.groupRecordsMax {
			break
		}
		recs += r
		n++
	}
	g := c.queue[:n:n]
	c.queue = c.queue[n:]
	if len(c.queue) == 0 {
		c.queue = nil // let the backing array go
	}
	return g
}

// commit commits g: its keys, records and answers in one transaction,
// and answers every request.
func (c *committer) commit(g []*pending) {
	defer func() {
		// A defect must not leave a handler waiting for ever.
		if r := recover(); r != nil {
			c.api.log.Error("group commit failed", "panic", r, "requests", len(g))
			ae := &apiError{status: http.StatusInternalServerError, Code: CodeInternal,
				Message: "an internal error; retry the same request with the same Idempotency-Key, and report it if it persists"}
			for _, p := range g {
				p.answer(outcome{aerr: ae})
			}
		}
	}()
	if c.api.onGroup != nil {
		c.api.onGroup(len(g))
	}
	// The requests' own contexts are not used: a client that hangs up
	// must not cut its group's transaction off.
	ctx := context.Background()
	if again := c.settle(ctx, g); len(again) > 0 {
		// Keys an earlier version left in progress: their records may
		// have settled, at the keys' coordinates, which a group of their
		// own probes. It answers every one of them.
		if left := c.settle(ctx, again); len(left) > 0 {
			panic(fmt.Sprintf("edge: %d requests taking their keys over were left unanswered", len(left)))
		}
	}
}

// settle commits the requests g in one transaction and answers them, but
// those whose keys are to be taken over (ClaimTakeOver, kept in
// p.takeOver), which it returns; a request with p.takeOver set takes its
// key over and is always answered. A transaction that fails for a reason
// of its records is committed again one request at a time, so one
// request's failure is its own.
func (c *committer) settle(ctx context.Context, g []*pending) (again []*pending) {
	a := c.api
	now := time.Now()
	reqs := make([]idempotency.Request, len(g))
	var inputs []message.Input
	for i, p := range g {
		reqs[i] = idempotency.Request{TenantID: p.tenant, Key: p.key, RequestHash: p.hash, Canonicals: p.canon,
			TakeOver: p.takeOver}
		for j, raw := range p.raws {
			inputs = append(inputs, message.Input{
				Topic: idempotency.HTTPTopic, Partition: idempotency.HTTPSettlePartition,
				Key: []byte(p.recs[j].Record.TenantID + "/" + p.recs[j].Record.Subject), Value: raw, Timestamp: now,
				Decoded: p.recs[j],
			})
		}
	}
	grp, err := idempotency.NewGroup(reqs, inputs, func(i int, results []message.Result) (idempotency.Answer, error) {
		p := g[i]
		if a.beforeCommit != nil && !a.beforeCommit(p.key) {
			return idempotency.Answer{}, errSimulatedCrash
		}
		return p.response(results), nil
	})
	if err != nil {
		panic(err) // every request was validated: a defect
	}
	sctx, cancel := context.WithTimeout(ctx, a.cfg.SettleTimeout)
	_, err = a.store.SettleWith(sctx, "", inputs, grp)
	cancel()
	if err != nil {
		var be *settle.BatchError
		switch {
		case errors.Is(err, errSimulatedCrash):
			for _, p := range g {
				p.answer(outcome{crashed: true})
			}
		case errors.As(err, &be) && len(g) > 1:
			for _, p := range g {
				again = append(again, c.settle(ctx, []*pending{p})...)
			}
		default:
			a.log.Warn("settling HTTP requests failed", "requests", len(g), "err", err)
			ae := storeError(err, "settle the records")
			for _, p := range g {
				p.answer(outcome{aerr: &ae})
			}
		}
		return again
	}
	for i, cl := range grp.Claims() {
		p := g[i]
		switch cl.State {
		case idempotency.ClaimAcquired:
			if cl.TakenOver {
				a.log.Info("took over an idempotency key an earlier version left in progress", "tenant", p.tenant,
					"key", p.key, "key_id", cl.KeyID, "attempt", cl.Attempts)
			}
			p.answer(outcome{body: cl.Response})
		case idempotency.ClaimTakeOver: // never for a request that takes its key over
			p.takeOver = &cl
			again = append(again, p)
		default:
			p.answer(outcome{claim: cl})
		}
	}
	return again
}

// errSimulatedCrash ends a transaction that a test crashes before its
// commit (API.beforeCommit).
var errSimulatedCrash = errors.New("edge: the simulated crash before the commit")

// response is the answer of a request whose records settled with
// results, in order: its body, and where it quotes identities' stored
// responses.
func (p *pending) response(results []message.Result) idempotency.Answer {
	out := make([]RecordResult, len(results))
	size := 32
	for i, res := range results {
		id := p.recs[i].Identity
		out[i] = RecordResult{Index: i, Identity: message.IdentityJSON{TenantID: id.TenantID,
			AccountPeriod: id.AccountPeriod, RecordID: id.RecordID, Operation: string(id.Operation)},
			Outcome: res.Outcome, Reason: res.Reason, CaseID: res.CaseID, Replayed: res.Replayed, Response: res.Response,
			responseOf: res.ResponseOf}
		size += 256 + len(res.Response)
	}
	a := idempotency.Answer{Status: http.StatusOK}
	if p.batch {
		a.Body, a.Quotes = (&BatchResponse{Results: out}).appendJSON(make([]byte, 0, size), nil)
	} else {
		a.Body, a.Quotes = out[0].appendJSON(make([]byte, 0, size), nil)
	}
	return a
}
