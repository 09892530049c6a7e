// Package layout is the map of settle's packages as floors: a package may
// import only packages on lower floors, so the folder list reads as the
// data's path (record → settle → its read side → the pipeline's parts →
// the service and its tools → the binary), and test support never reaches
// production code. Its test checks the real imports (go list) against the
// map; docs/design.md draws the same map.
//
// It holds data only and is imported by nothing.
package layout

// Floors gives every package of the module its floor. A package missing
// here fails the test: place a new package on its floor first.
var Floors = map[string]int{
	// The ground: the input grammar, exact decimals, small tools, the
	// schema. They import no package of settle's (kafkahdr: record only).
	"record":              0,
	"internal/money":      0,
	"internal/crashpoint": 0,
	"internal/backoff":    0,
	"internal/testnet":    0,
	"internal/pgcluster":  0,
	"internal/kafkatest":  0,
	"internal/jsontest":   0,
	"internal/workload":   0,
	"telemetry":           0,
	"settle/schema":       0,
	"settle/dberr":        0,
	"internal/kafkalog":   0,
	"internal/kafkaerr":   0,
	"internal/kafkahdr":   1,
	"internal/proctest":   1,
	"corrections":         1,
	"settle/message":      1,

	// The typed queries over settle's tables (generated; imported only by
	// settle and its rooms), and the command that migrates the scratch
	// database they are generated against.
	"settle/internal/db":         1,
	"settle/internal/db/migrate": 1,

	// What one transaction attempt knows and how it reads and writes it:
	// the rows it loaded and locked, the rows its decisions staged.
	"settle/internal/state": 2,

	// The settling transaction: its decisions, its frame and its retries.
	"settle": 3,
	// The canary: a client of the topics alone that sends the reserved
	// tenant's records; below every place that leaves them out.
	"canary": 3,

	// What reads what the transaction wrote, in its vocabulary, and the
	// rows worked through around it: the outbox the relay publishes, the
	// Idempotency-Keys the HTTP edge claims before it, the webhook
	// deliveries after it, the operational history pruned.
	"settle/inspect":     4,
	"settle/outbox":      4,
	"settle/reconcile":   4,
	"settle/settletest":  4,
	"settle/idempotency": 4,
	"settle/webhooks":    4,
	"settle/retention":   4,
	// Finance's check of the settlements topic alone, no database.
	"settle/verify": 4,

	// The pipeline's parts and the analysts' surface, side by side: none
	// imports another.
	"consumer":      5,
	"relay":         5,
	"edge/ingest":   5,
	"edge/webhook":  5,
	"analyst":       5,
	"sourcefile":    5,
	"e2e/faults":    5,
	"edge/edgetest": 5,

	// What assembles the parts: the running service, and the benchmark
	// that runs it under load.
	"service": 6,
	"bench":   7,

	// The binary: flags and environment to packages.
	"cmd/settle": 8,

	// Tests only, and files checked offline.
	"e2e":             TestsFloor,
	"deploy":          TestsFloor,
	"internal/layout": TestsFloor,
}

// TestsFloor is the floor of packages that are tests only: they may import
// anything, test support included.
const TestsFloor = 9

// TestSupport are packages that production code must never import: per-test
// databases, brokers, processes and addresses, the fault harness, the
// edge's tests' store, and the JSON encoders' test strings.
var TestSupport = map[string]bool{
	"settle/settletest":  true,
	"internal/kafkatest": true,
	"internal/jsontest":  true,
	"internal/proctest":  true,
	"internal/testnet":   true,
	"e2e/faults":         true,
	"edge/edgetest":      true,
}
