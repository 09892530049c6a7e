package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/idempotency"
	"github.com/settlehq/settle/settle/message"
)

// Group commit. A request that passed validation joins the queue; a
// committer takes whatever is queued (up to GroupRequestsMax requests and
// the store's batch of records) and, for the whole group, claims the keys
// in one statement, settles every claimed request's records in one Settle
// call and stores the answers by one fenced write. While a group commits
// the next one gathers, so an idle edge adds no wait and a busy one pays
// two transactions per group instead of three per request: the settling
// one, and one that stores the group's answers together with the next
// group's claims. At most
// GroupsInFlightMax groups commit at once; a committer goroutine lives only
// while the queue holds requests.
//
// Each request keeps its own answer: claims are decided per key (replay,
// busy, mismatch answered to that request alone), a settle that fails for
// one request's records is retried per request, and a claim that was taken
// over loses only its own fenced write.

// pending is one validated request waiting for its group.
type pending struct {
	tenant, key string
	hash        []byte
	canon       [][]byte
	raws        []json.RawMessage
	recs        []*record.Decoded
	batch       bool

	claim    idempotency.Claim
	answered bool
	done     chan outcome // buffered: the committer never waits for the handler
}

// outcome is what the committer decided for a request.
type outcome struct {
	claim   idempotency.Claim // replay, busy, mismatch: answered by the handler from it
	body    []byte            // the stored answer (200)
	aerr    *apiError         // answered instead of a body
	crashed bool              // tests: the simulated crash before the answer was stored
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

// run commits groups until the queue is empty. The answers of a group
// that settled are stored in the same round trip and transaction as the
// claims of the next group, when one waits; alone when none does.
func (c *committer) run() {
	var settled *answered
	for {
		g := c.take(settled == nil)
		if g == nil && settled == nil {
			return
		}
		settled = c.commit(settled, g)
	}
}

// take removes the next group from the queue: the requests in arrival
// order up to the caps. With none queued it returns nil, and the
// committer ends when leave says so.
func (c *committer) take(leave bool) []*pending {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) == 0 {
		if leave {
			c.running--
		}
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

// answered is a settled group whose answers wait for the fenced write.
type answered struct {
	answers []idempotency.Answer
	reqs    []*pending
}

// commit stores the answers of settled (if any) and claims g (if any) in
// one round trip, answers both, settles g's claimed requests and returns
// their answers, to be stored with the next group's claims.
func (c *committer) commit(settled *answered, g []*pending) (next *answered) {
	defer func() {
		// A defect must not leave a handler waiting for ever.
		if r := recover(); r != nil {
			c.api.log.Error("group commit failed", "panic", r, "requests", len(g))
			ae := &apiError{status: http.StatusInternalServerError, Code: CodeInternal,
				Message: "an internal error; retry the same request with the same Idempotency-Key, and report it if it persists"}
			for _, p := range g {
				p.answer(outcome{aerr: ae})
			}
			if settled != nil {
				for _, p := range settled.reqs {
					p.answer(outcome{aerr: ae})
				}
			}
			next = nil
		}
	}()
	if c.api.onGroup != nil && len(g) > 0 {
		c.api.onGroup(len(g))
	}
	// The requests' own contexts are not used: a client that hangs up must
	// not leave a settled key without its stored answer.
	ctx := context.Background()
	reqs := make([]idempotency.Request, len(g))
	for i, p := range g {
		reqs[i] = idempotency.Request{TenantID: p.tenant, Key: p.key, RequestHash: p.hash, Canonicals: p.canon, Lease: c.api.cfg.Lease}
	}
	var answers []idempotency.Answer
	if settled != nil {
		answers = settled.answers
	}
	// Bounded like settling: a contended or stalled database answers the
	// requests 503 (retry with the same key) instead of holding them, and
	// a stop, for ever. Answers not stored in time are the retries' after
	// the lease, as when the database is down.
	kctx, cancel := context.WithTimeout(ctx, c.api.cfg.SettleTimeout)
	lost, claims, err := c.api.keys.CompleteAndClaim(kctx, answers, reqs)
	cancel()
	if settled != nil {
		c.answerStored(settled, lost, err)
	}
	if err != nil {
		ae := storeError(err, "claim the Idempotency-Key")
		for _, p := range g {
			p.answer(outcome{aerr: &ae})
		}
		return nil
	}
	var work []*pending
	for i, p := range g {
		if claims[i].State != idempotency.ClaimAcquired {
			p.answer(outcome{claim: claims[i]})
			continue
		}
		p.claim = claims[i]
		if p.claim.TakenOver {
			c.api.log.Info("took over an idempotency key whose lease expired", "tenant", p.tenant, "key", p.key,
				"key_id", p.claim.KeyID, "attempt", p.claim.Attempts)
		}
		work = append(work, p)
	}
	next = &answered{}
	c.settle(ctx, work, next)
	if len(next.reqs) == 0 {
		return nil
	}
	return next
}

// settle settles the records of claimed requests in one Settle call and
// adds their answers to next. A batch that fails for a reason of its
// records is settled again one request at a time, so one request's failure
// is its own.
func (c *committer) settle(ctx context.Context, work []*pending, next *answered) {
	if len(work) == 0 {
		return
	}
	a := c.api
	now := time.Now()
	var inputs []message.Input
	for _, p := range work {
		for i, raw := range p.raws {
			inputs = append(inputs, message.Input{
				Topic: idempotency.HTTPTopic, Partition: idempotency.HTTPSettlePartition, Offset: idempotency.HTTPOffset(p.claim.KeyID, i),
				Key: []byte(p.recs[i].Record.TenantID + "/" + p.recs[i].Record.Subject), Value: raw, Timestamp: now,
				Decoded: p.recs[i],
				// The key's first attempt: its id, and so these
				// coordinates, were never used before.
				FirstDelivery: p.claim.Attempts == 1,
			})
		}
	}
	sctx, cancel := context.WithTimeout(ctx, a.cfg.SettleTimeout)
	results, err := a.store.Settle(sctx, "", inputs)
	cancel()
	if err != nil {
		var be *settle.BatchError
		if errors.As(err, &be) && len(work) > 1 {
			for _, p := range work {
				c.settle(ctx, []*pending{p}, next)
			}
			return
		}
		c.fail(ctx, work, err)
		return
	}
	for _, p := range work {
		body := p.response(results[:len(p.recs)])
		results = results[len(p.recs):]
		if a.afterSettle != nil && !a.afterSettle(p.claim.KeyID, p.claim.AttemptID) {
			p.answer(outcome{crashed: true}) // the simulated crash: no answer stored
			continue
		}
		next.answers = append(next.answers, idempotency.Answer{KeyID: p.claim.KeyID, AttemptID: p.claim.AttemptID,
			Status: http.StatusOK, Response: body})
		next.reqs = append(next.reqs, p)
	}
}

// answerStored answers the requests of a settled group once the fenced
// write of their answers returned lost (or err).
func (c *committer) answerStored(s *answered, lost []bool, err error) {
	a := c.api
	if err != nil {
		a.log.Warn("could not store the answers of idempotency keys; a retry after the lease gets the same results",
			"keys", len(s.answers), "err", err)
		ae := storeError(err, "store the answer")
		for _, p := range s.reqs {
			p.answer(outcome{aerr: &ae})
		}
		return
	}
	for i, p := range s.reqs {
		if lost[i] {
			// A retry took the key over while this attempt ran past its
			// lease; its answer, not this one, is the key's. The records
			// settled once either way: their coordinates are the key's.
			a.log.Warn("idempotency key was taken over while this attempt ran; its answer is the retry's",
				"tenant", p.tenant, "key", p.key, "key_id", p.claim.KeyID)
			p.answer(outcome{aerr: &apiError{status: http.StatusConflict, Code: CodeClaimLost, RetryAfterSeconds: 1,
				Message: "this attempt ran past its lease and a retry took the Idempotency-Key over: retry the same request to get the stored answer"}})
			continue
		}
		p.answer(outcome{body: s.answers[i].Response})
	}
}

// fail answers requests whose settling failed. Nothing settled for sure (a
// commit that was cut off may have landed: the retry then finds its
// coordinates and gets the stored results); their leases end so the
// retries need not wait them out.
func (c *committer) fail(ctx context.Context, work []*pending, err error) {
	ids, attempts := make([]int64, len(work)), make([]string, len(work))
	for i, p := range work {
		ids[i], attempts[i] = p.claim.KeyID, p.claim.AttemptID
	}
	rctx, cancel := context.WithTimeout(ctx, c.api.cfg.SettleTimeout)
	defer cancel()
	if _, rerr := c.api.keys.ReleaseMany(rctx, ids, attempts); rerr != nil {
		c.api.log.Warn("could not release idempotency keys; their retries take them over when the leases end", "keys", len(ids), "err", rerr)
	}
	c.api.log.Warn("settling HTTP requests failed", "requests", len(work), "err", err)
	ae := storeError(err, "settle the records")
	for _, p := range work {
		p.answer(outcome{aerr: &ae})
	}
}

// response is the answer body of a request whose records settled with
// results, in order.
func (p *pending) response(results []message.Result) []byte {
	out := make([]RecordResult, len(results))
	for i, res := range results {
		id := p.recs[i].Identity
		out[i] = RecordResult{Index: i, Identity: message.IdentityJSON{TenantID: id.TenantID,
			AccountPeriod: id.AccountPeriod, RecordID: id.RecordID, Operation: string(id.Operation)},
			Outcome: res.Outcome, Reason: res.Reason, CaseID: res.CaseID, Replayed: res.Replayed, Response: res.Response}
	}
	var body []byte
	var err error
	if p.batch {
		body, err = json.Marshal(BatchResponse{Results: out})
	} else {
		body, err = json.Marshal(out[0])
	}
	if err != nil {
		panic(fmt.Sprintf("edge: marshal the answer of key %d: %v", p.claim.KeyID, err)) // the types always marshal
	}
	return body
}
