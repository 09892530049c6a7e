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
	// schema. They import no package of settle's.
	"record":              0,
	"internal/money":      0,
	"internal/crashpoint": 0,
	"internal/backoff":    0,
	"internal/loopback":   0,
	"internal/child":      0,
	"internal/kafkaread":  0,
	"internal/jsontest":   0,
	"internal/workload":   0,
	"internal/cpuprofile": 0,
	"telemetry":           0,
	"settle/schema":       0,
	"settle/dberr":        0,
	"internal/kafkalog":   0,
	"internal/xerial":     0,

	// A record's versioned canonical form and its hash, above the grammar
	// that decodes it.
	"fingerprint": 1,

	// What needs a free loopback port (internal/loopback): the tests'
	// network helpers and the private PostgreSQL cluster.
	"internal/testnet":   1,
	"internal/pgcluster": 1,
	// What every package of generated queries runs on (transactions,
	// pipelines, arrays, COPY, named errors), above the record whose
	// headers the outbox stores.
	"internal/pgq": 1,

	// kafkahdr: record only. outlet: the service's one way out to Kafka
	// (every record it produces, one retry and one refusal policy).
	"internal/kafkahdr": 2,
	"outlet":            2,
	"internal/proctest": 2,
	"corrections":       2,
	"settle/message":    2,

	// The typed queries, generated per owner over the one schema, each
	// imported only by its owner: settle's tables (settle and its rooms),
	// the Idempotency-Keys (the edge's), the webhook rows, the relay's side
	// of the outbox; and the command that migrates the scratch database
	// they are generated against.
	"settle/internal/db":                  2,
	"settle/internal/db/migrate":          2,
	"edge/idempotency/internal/db":        2,
	"edge/webhook/deliveries/internal/db": 2,
	"relay/outbox/internal/db":            2,

	// The tests' broker, seeded with the pipeline's topics by their names
	// in settle/message.
	"internal/kafkatest": 3,

	// What one transaction attempt knows and how it reads and writes it:
	// the rows it loaded and locked, the rows its decisions staged.
	"settle/internal/state": 3,

	// The settling transaction: its decisions, its frame and its retries.
	"settle": 4,
	// The canary: a client of the topics alone that sends the reserved
	// tenant's records; below every place that leaves them out.
	"canary": 4,

	// What reads what the transaction wrote, in its vocabulary, and the
	// operational history pruned.
	"settle/inspect":    5,
	"settle/reconcile":  5,
	"settle/settletest": 5,
	"settle/retention":  5,
	// The stores beside their users, riding or following the transaction:
	// the Idempotency-Keys the HTTP edge claims in it (a settle.Rider), the
	// webhook deliveries after it, the outbox rows the relay publishes.
	"edge/idempotency":        5,
	"edge/webhook/deliveries": 5,
	"relay/outbox":            5,
	// Finance's check of the settlements topic alone, no database.
	"settle/verify": 5,

	// The pipeline's parts and the analysts' surface, side by side: none
	// imports another.
	"consumer":      6,
	"relay":         6,
	"edge/ingest":   6,
	"edge/webhook":  6,
	"analyst":       6,
	"e2e/faults":    6,
	"edge/edgetest": 6,

	// What assembles the parts: the running service, and the benchmark
	// that runs it under load.
	"service": 7,
	"bench":   8,

	// The binaries: flags and environment to packages. The service's,
	// and the benchmark's apart from it.
	"cmd/settle":       9,
	"cmd/settle-bench": 9,

	// Tests only. (deploy/, the deployment files' offline checks, is a
	// module of its own and imports only what any program could.)
	"e2e":             TestsFloor,
	"internal/layout": TestsFloor,
}

// TestsFloor is the floor of packages that are tests only: they may import
// anything, test support included.
const TestsFloor = 10

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
