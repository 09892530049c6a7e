// Package ingest is the HTTP edge's way in, the records API: POST
// /v1/records settles records sent over HTTP through the same core as the
// Kafka consumer, behind a required Idempotency-Key. A request is
// validated alone (token, key, body, every record decoded), then committed
// with the requests queued beside it as one group (group.go): one settling
// transaction claims their keys, settles their records and stores their
// answers.
//
// It owns the API's HTTP contract (status codes, the error codes of
// errors.go, headers) and the group commit of concurrent requests. It
// never speaks SQL (package settle settles and package edge/idempotency
// keeps the keys, behind the small Store and Keys declared here) and
// never decides an effect: the
// settling core does, and a record's identity stays the guard against a
// second effect whatever the API does. Settlements leave by the outbox, and
// by webhook through package edge/webhook, which this package knows nothing
// of.
package ingest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/settlehq/settle/edge/idempotency"
	"github.com/settlehq/settle/fingerprint"
	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle/message"
)

// Config configures the API. The zero value of every field but Tokens is a
// documented default.
type Config struct {
	// Tokens maps each bearer token to the one tenant it may write for.
	Tokens map[string]string

	// BatchRecordsMax caps the records of one request. 0 = 100; at most the
	// store's batch limit and idempotency.HTTPBatchRecordsMax.
	BatchRecordsMax int

	// BodyBytesMax caps a request body. 0 = 1 MiB.
	BodyBytesMax int64

	// SettleTimeout bounds the transaction of one group of requests: its
	// requests are answered 503 (retry) when it runs out, and their keys
	// are free again. 0 = 10s.
	SettleTimeout time.Duration

	// GroupRequestsMax caps the requests committed as one group (one
	// transaction for all of them); a group also holds at most the store's
	// batch of records. 0 = 64.
	GroupRequestsMax int

	// GroupsInFlightMax caps the groups committing at once. 0 = 2: one
	// group gathers while another commits, and a stalled group does not
	// stop the edge.
	GroupsInFlightMax int

	// Logger receives the API's log. nil = slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.BatchRecordsMax == 0 {
		c.BatchRecordsMax = 100
	}
	if c.BodyBytesMax == 0 {
		c.BodyBytesMax = 1 << 20
	}
	if c.SettleTimeout == 0 {
		c.SettleTimeout = 10 * time.Second
	}
	if c.GroupRequestsMax == 0 {
		c.GroupRequestsMax = 64
	}
	if c.GroupsInFlightMax == 0 {
		c.GroupsInFlightMax = 2
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports the first setting that cannot work, saying how to fix it.
func (c Config) Validate() error {
	if len(c.Tokens) == 0 {
		return errors.New("edge: no API tokens: give at least one tenant=token (--api-token or SETTLE_API_TOKENS)")
	}
	for tok, tenant := range c.Tokens {
		if len(tok) < 16 {
			return fmt.Errorf("edge: the token of tenant %q is shorter than 16 characters: use a long random token", tenant)
		}
		if tenant == "" {
			return errors.New("edge: a token has no tenant: write tenant=token")
		}
	}
	switch {
	case c.BatchRecordsMax < 0 || c.BatchRecordsMax > idempotency.HTTPBatchRecordsMax:
		return fmt.Errorf("edge: batch records max %d must be between 1 and %d (0 = 100)", c.BatchRecordsMax, idempotency.HTTPBatchRecordsMax)
	case c.BodyBytesMax < 0:
		return fmt.Errorf("edge: body bytes max %d must be positive (0 = 1 MiB)", c.BodyBytesMax)
	case c.SettleTimeout < 0:
		return errors.New("edge: settle timeout must be positive (0 = 10s)")
	case c.GroupRequestsMax < 0 || c.GroupRequestsMax > idempotency.GroupKeysMax:
		return fmt.Errorf("edge: group requests max %d must be between 1 and %d (0 = 64)", c.GroupRequestsMax, idempotency.GroupKeysMax)
	case c.GroupsInFlightMax < 0 || c.GroupsInFlightMax > 64:
		return fmt.Errorf("edge: groups in flight max %d must be between 1 and 64 (0 = 2)", c.GroupsInFlightMax)
	}
	return nil
}

// API serves POST /v1/records. Create it with NewAPI; it is an
// http.Handler.
type API struct {
	store Store
	keys  Keys
	cfg   Config
	dec   *record.Decoder
	log   *slog.Logger
	mux   *http.ServeMux
	group committer
	// groupRecordsMax caps the records of one group: the store's batch.
	groupRecordsMax int

	// beforeCommit, when set (tests only), runs in a group's transaction
	// for each request whose records settled, before the commit: where a
	// crash or a stall holds the key. It returns false to simulate a crash
	// (the transaction rolled back, the connections cut).
	beforeCommit func(key string) bool

	// onGroup, when set (tests only), runs as a committer takes a group of
	// size requests, before their transaction.
	onGroup func(size int)
}

// NewAPI returns the API that settles through store behind the
// Idempotency-Keys of keys (both over one database: a key's records settle
// at coordinates its row id gives).
func NewAPI(store Store, keys Keys, cfg Config) (*API, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	if max := store.Config().BatchRecordsMax; cfg.BatchRecordsMax > max {
		return nil, fmt.Errorf("edge: batch records max %d is more than the store's %d", cfg.BatchRecordsMax, max)
	}
	dec, err := record.NewDecoder(store.Config().Decoder)
	if err != nil {
		return nil, err
	}
	a := &API{store: store, keys: keys, cfg: cfg, dec: dec, log: cfg.Logger.With("component", "edge"),
		groupRecordsMax: store.Config().BatchRecordsMax}
	a.group.api = a
	a.mux = http.NewServeMux()
	a.mux.HandleFunc("POST /v1/records", a.postRecords)
	a.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/records" {
			w.Header().Set("Allow", "POST")
			writeError(w, apiError{status: http.StatusMethodNotAllowed, Code: CodeMethodNotAllowed, Message: "use POST /v1/records"})
			return
		}
		writeError(w, apiError{status: http.StatusNotFound, Code: CodeNotFound, Message: "no such endpoint: records go to POST /v1/records"})
	})
	return a, nil
}

// ServeHTTP implements http.Handler.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

// RecordResult is the answer for one record: its outcome and, when it has
// one, the identity's stored response (CONTRACT.md section 4).
type RecordResult struct {
	Index    int                  `json:"index"`
	Identity message.IdentityJSON `json:"identity"`
	Outcome  message.Outcome      `json:"outcome"`
	Reason   string               `json:"reason,omitempty"`
	CaseID   int64                `json:"case_id,omitempty"`
	// Replayed: the identity was settled before (by HTTP or Kafka) and
	// Response is its stored answer.
	Replayed bool            `json:"replayed,omitempty"`
	Response json.RawMessage `json:"response,omitempty"`

	// responseOf is the identity whose stored response Response is
	// (message.Result.ResponseOf), 0 when none is: the key's row quotes it.
	responseOf int64
}

// appendJSON appends r's JSON encoding to b: the bytes encoding/json gives
// (TestRecordResultAppendJSON), without its reflection and its second pass
// over the stored response, which is spliced in as it is: this service
// wrote it, compact (message.Result.AppendJSON does the same). Where the
// response is an identity's stored one, it appends to quotes where in b
// it went.
func (r *RecordResult) appendJSON(b []byte, quotes []idempotency.Quote) ([]byte, []idempotency.Quote) {
	b = append(b, `{"index":`...)
	b = strconv.AppendInt(b, int64(r.Index), 10)
	b = append(b, `,"identity":`...)
	b = r.Identity.AppendJSON(b)
	b = message.AppendField(b, "outcome", string(r.Outcome))
	b = message.AppendOptional(b, "reason", r.Reason)
	b = message.AppendOptionalInt(b, "case_id", r.CaseID)
	if r.Replayed {
		b = append(b, `,"replayed":true`...)
	}
	if len(r.Response) > 0 {
		b = append(b, `,"response":`...)
		if r.responseOf != 0 {
			quotes = append(quotes, idempotency.Quote{At: len(b), Len: len(r.Response), IdentityID: r.responseOf})
		}
		b = append(b, r.Response...)
	}
	return append(b, '}'), quotes
}

// BatchResponse answers a request whose body was a JSON array: one result
// per record, in order.
type BatchResponse struct {
	Results []RecordResult `json:"results"`
}

// appendJSON appends r's JSON encoding to b, as encoding/json gives it,
// with the quotes of RecordResult.appendJSON.
func (r *BatchResponse) appendJSON(b []byte, quotes []idempotency.Quote) ([]byte, []idempotency.Quote) {
	if r.Results == nil {
		return append(b, `{"results":null}`...), quotes
	}
	b = append(b, `{"results":[`...)
	for i := range r.Results {
		if i > 0 {
			b = append(b, ',')
		}
		b, quotes = r.Results[i].appendJSON(b, quotes)
	}
	return append(b, ']', '}'), quotes
}

// Headers of the API.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderReplayed       = "Idempotent-Replayed"
)

func (a *API) postRecords(w http.ResponseWriter, r *http.Request) {
	tenant, aerr := a.authenticate(r)
	if aerr != nil {
		writeError(w, *aerr)
		return
	}
	key := r.Header.Get(HeaderIdempotencyKey)
	if aerr := checkKey(key); aerr != nil {
		writeError(w, *aerr)
		return
	}
	body, aerr := a.readBody(w, r)
	if aerr != nil {
		writeError(w, *aerr)
		return
	}
	raws, batch, aerr := a.split(body)
	if aerr != nil {
		writeError(w, *aerr)
		return
	}
	recs, aerr := a.decode(raws, tenant)
	if aerr != nil {
		writeError(w, *aerr)
		return
	}
	hash := sha256.Sum256(body)
	canon := make([][]byte, len(recs))
	for i := range recs {
		canon[i] = recs[i].Canonical
	}
	o := a.group.submit(&pending{tenant: tenant, key: key, hash: hash[:], canon: canon, raws: raws, recs: recs, batch: batch})
	switch {
	case o.crashed:
		panic(http.ErrAbortHandler) // the simulated crash: no answer stored, the connection cut
	case o.aerr != nil:
		writeError(w, *o.aerr)
	case o.body != nil:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write(o.body)
	default:
		a.answerClaim(r.Context(), w, o.claim, canon, batch)
	}
}

// answerClaim answers a request whose key was not claimed for it: the
// stored answer (replay), busy, or a conflict with the key's first body.
func (a *API) answerClaim(ctx context.Context, w http.ResponseWriter, claim idempotency.Claim, canon [][]byte, batch bool) {
	switch claim.State {
	case idempotency.ClaimReplay:
		if stored := storedAsBatch(claim.Response); claim.ResponseStatus == http.StatusOK && stored != batch {
			shape := map[bool]string{true: "a JSON array", false: "a single JSON object"}
			writeError(w, apiError{status: http.StatusConflict, Code: CodeKeyConflict,
				Message: fmt.Sprintf("this Idempotency-Key's first request sent its records as %s, this one as %s; "+
					"send the request as it was first sent to get its stored answer", shape[stored], shape[batch])})
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set(HeaderReplayed, "true")
		w.WriteHeader(claim.ResponseStatus)
		w.Write(claim.Response)
	case idempotency.ClaimBusy:
		secs := int((claim.RetryAfter + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
		writeError(w, apiError{status: http.StatusConflict, Code: CodeBusy, RetryAfterSeconds: max(secs, 1),
			Message: "a request with this Idempotency-Key is still being processed: retry the same request after Retry-After seconds to get its answer"})
	case idempotency.ClaimMismatch:
		// Opening the case is this request's business alone: a client
		// that hangs up must not leave it half done.
		conflicts, err := a.keys.OpenConflictCases(context.WithoutCancel(ctx), claim.KeyID, claim.StoredCanonicals, canon)
		if err != nil {
			writeError(w, storeError(err, "open the conflict case"))
			return
		}
		msg := "this Idempotency-Key was used for a request with a different body; nothing was settled. Send a changed request under a new key"
		if len(claim.StoredCanonicals) != len(canon) {
			msg += fmt.Sprintf(" (the first request had %d records, this one %d)", len(claim.StoredCanonicals), len(canon))
		}
		for _, c := range conflicts {
			if c.CaseID == 0 && c.Index < len(claim.StoredCanonicals) {
				msg += "; a record naming another record than the first request's (no case_id) is a new record: send it under a key of its own"
				break
			}
		}
		writeError(w, apiError{status: http.StatusConflict, Code: CodeKeyConflict, Message: msg, Conflicts: conflicts})
	default:
		panic(fmt.Sprintf("edge: claim state %d has no answer", claim.State))
	}
}

// storedAsBatch tells whether a key's stored answer (200) is a batch's
// (BatchResponse, whose first field is results) or a single record's.
func storedAsBatch(answer []byte) bool {
	return bytes.HasPrefix(answer, []byte(`{"results":`))
}

// authenticate returns the tenant of the request's bearer token.
func (a *API) authenticate(r *http.Request) (string, *apiError) {
	auth := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok || tok == "" {
		return "", &apiError{status: http.StatusUnauthorized, Code: CodeUnauthenticated,
			Message: "send the tenant's API token as Authorization: Bearer <token>"}
	}
	tenant := ""
	got := sha256.Sum256([]byte(tok))
	for t, ten := range a.cfg.Tokens {
		// Every token is compared, in constant time and as hashes of one
		// length, so timing tells neither which one nearly matched nor how
		// long they are.
		if want := sha256.Sum256([]byte(t)); subtle.ConstantTimeCompare(want[:], got[:]) == 1 {
			tenant = ten
		}
	}
	if tenant == "" {
		return "", &apiError{status: http.StatusUnauthorized, Code: CodeUnauthenticated,
			Message: "the bearer token is not known: use the token configured for your tenant"}
	}
	return tenant, nil
}

func checkKey(key string) *apiError {
	if key == "" {
		return &apiError{status: http.StatusBadRequest, Code: CodeKeyMissing,
			Message: "send an Idempotency-Key header: a unique value per logical request, the same on every retry of it"}
	}
	if len(key) > idempotency.KeyBytesMax {
		return &apiError{status: http.StatusBadRequest, Code: CodeKeyInvalid,
			Message: fmt.Sprintf("the Idempotency-Key is %d bytes: use at most %d", len(key), idempotency.KeyBytesMax)}
	}
	for _, c := range []byte(key) {
		if c < 0x21 || c > 0x7e {
			return &apiError{status: http.StatusBadRequest, Code: CodeKeyInvalid,
				Message: "the Idempotency-Key must be printable ASCII without spaces (a UUID is a good choice)"}
		}
	}
	return nil
}

func (a *API) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *apiError) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.cfg.BodyBytesMax))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &apiError{status: http.StatusRequestEntityTooLarge, Code: CodeBodyTooLarge,
				Message: fmt.Sprintf("the body is larger than %d bytes: send fewer records per request", a.cfg.BodyBytesMax)}
		}
		return nil, &apiError{status: http.StatusBadRequest, Code: CodeInvalidJSON, Message: "could not read the body: " + err.Error()}
	}
	return body, nil
}

// split returns the records of a body: one JSON object, or an array of them.
func (a *API) split(body []byte) ([]json.RawMessage, bool, *apiError) {
	t := bytes.TrimLeft(body, " \t\r\n")
	if len(t) > 0 && t[0] == '{' {
		return []json.RawMessage{body}, false, nil
	}
	if len(t) == 0 || t[0] != '[' {
		return nil, false, &apiError{status: http.StatusBadRequest, Code: CodeInvalidJSON,
			Message: "the body must be one record (a JSON object) or a JSON array of records"}
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(body, &raws); err != nil {
		return nil, true, &apiError{status: http.StatusBadRequest, Code: CodeInvalidJSON, Message: "the body is not a JSON array of records: " + err.Error()}
	}
	switch {
	case len(raws) == 0:
		return nil, true, &apiError{status: http.StatusBadRequest, Code: CodeEmptyBatch, Message: "the array holds no records: send at least one"}
	case len(raws) > a.cfg.BatchRecordsMax:
		return nil, true, &apiError{status: http.StatusRequestEntityTooLarge, Code: CodeBatchTooLarge,
			Message: fmt.Sprintf("the array holds %d records: send at most %d per request", len(raws), a.cfg.BatchRecordsMax)}
	}
	return raws, true, nil
}

// decode validates every record before anything is claimed, so that a
// client can fix a request and resend it under the same key. What it
// decodes is what settles: the records are not decoded again.
func (a *API) decode(raws []json.RawMessage, tenant string) ([]*fingerprint.Decoded, *apiError) {
	recs := make([]*fingerprint.Decoded, len(raws))
	var bad []RecordError
	for i, raw := range raws {
		p := fingerprint.Prepare(a.dec, raw, nil)
		if de := p.Err; de != nil {
			bad = append(bad, RecordError{Index: i, Reason: de.Reason, Field: de.Field, Message: de.Error()})
			continue
		}
		recs[i] = &p
	}
	if len(bad) > 0 {
		return nil, &apiError{status: http.StatusUnprocessableEntity, Code: CodeInvalidRecord, Errors: bad,
			Message: fmt.Sprintf("%d of %d records are not valid: fix the fields named in errors and resend (nothing was settled)", len(bad), len(raws))}
	}
	for i := range recs {
		if t := recs[i].Record.TenantID; t != tenant {
			return nil, &apiError{status: http.StatusForbidden, Code: CodeTenantForbidden,
				Message: fmt.Sprintf("record %d is for tenant %q, but this token writes only for tenant %q: nothing was settled", i, t, tenant)}
		}
	}
	return recs, nil
}
