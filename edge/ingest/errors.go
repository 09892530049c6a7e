package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/settlehq/settle/edge/idempotency"
	"github.com/settlehq/settle/settle/dberr"
)

// Error codes of the API: stable, for clients to branch on. The message
// beside each says what to fix, for people.
const (
	CodeUnauthenticated  = "unauthenticated"          // 401: no or unknown bearer token
	CodeKeyMissing       = "idempotency_key_missing"  // 400
	CodeKeyInvalid       = "idempotency_key_invalid"  // 400: too long or not printable ASCII
	CodeInvalidJSON      = "invalid_json"             // 400: not an object or an array of them
	CodeEmptyBatch       = "empty_batch"              // 400
	CodeBatchTooLarge    = "batch_too_large"          // 413
	CodeBodyTooLarge     = "body_too_large"           // 413
	CodeInvalidRecord    = "invalid_record"           // 422: see errors; nothing settled, key not used
	CodeTenantForbidden  = "tenant_forbidden"         // 403: a record for another tenant than the token's
	CodeBusy             = "busy"                     // 409 + Retry-After: the key's first request still runs
	CodeKeyConflict      = "idempotency_key_conflict" // 409: the key was used for another body; see conflicts
	CodeUnavailable      = "unavailable"              // 503 + Retry-After: the database is down or contended
	CodeInternal         = "internal"                 // 500
	CodeMethodNotAllowed = "method_not_allowed"       // 405
	CodeNotFound         = "not_found"                // 404
)

// RecordError says what is wrong with one record of a request.
type RecordError struct {
	Index   int    `json:"index"`
	Reason  string `json:"reason"` // invalid_json, too_large, invalid_field
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// apiError is the JSON body of every error answer.
type apiError struct {
	status            int
	Code              string                 `json:"code"`
	Message           string                 `json:"message"`
	RetryAfterSeconds int                    `json:"retry_after_seconds,omitempty"`
	Errors            []RecordError          `json:"errors,omitempty"`
	Conflicts         []idempotency.Conflict `json:"conflicts,omitempty"`
}

func writeError(w http.ResponseWriter, e apiError) {
	if e.RetryAfterSeconds > 0 && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfterSeconds))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	// An apiError always marshals; a failed write means the client went
	// away, and there is nobody left to tell.
	_ = json.NewEncoder(w).Encode(e)
}

// storeError answers a failure of the store while doing what.
func storeError(err error, what string) apiError {
	if errors.Is(err, context.DeadlineExceeded) {
		return apiError{status: http.StatusServiceUnavailable, Code: CodeUnavailable, RetryAfterSeconds: 1,
			Message: "could not " + what + " in time; retry the same request with the same Idempotency-Key"}
	}
	if errors.Is(err, dberr.ErrUnavailable) || errors.Is(err, dberr.ErrContention) {
		return apiError{status: http.StatusServiceUnavailable, Code: CodeUnavailable, RetryAfterSeconds: 1,
			Message: "could not " + what + ": the database is unavailable or busy; retry the same request with the same Idempotency-Key"}
	}
	return apiError{status: http.StatusInternalServerError, Code: CodeInternal,
		Message: "could not " + what + ": an internal error; retry the same request with the same Idempotency-Key, and report it if it persists"}
}
