// Command settle is the one binary of settle: the service (`settle run`),
// the schema migrator, the developer sandbox and the operator tools.
//
// It only wires configuration to packages: every setting is a flag, which
// beats its environment variable (SETTLE_*, plus DATABASE_URL and
// KAFKA_BROKERS), which beats the default; `settle <command> --help` lists
// them all.
//
// Adding a command: write one struct with a Run(*app) error method in its
// own file cmd/settle/<command>.go and add one field for it to cli below.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/alecthomas/kong"
)

// Exit codes (CONTRACT.md section 6).
const (
	exitOK       = 0
	exitFailure  = 1
	exitUsage    = 2
	exitMismatch = 3 // a check that found a discrepancy (reconcile)
)

// cli lists the commands; each is one struct in its own file.
type cli struct {
	LogLevel       string `name:"log-level" env:"SETTLE_LOG_LEVEL" default:"info" enum:"debug,info,warn,error" help:"Log level: debug, info, warn or error (${env})."`
	MemoryLimitMiB int64  `name:"memory-limit-mib" env:"SETTLE_MEMORY_LIMIT_MIB" default:"384" help:"Soft memory limit of the process in MiB: below it the garbage collector runs 4x less often than Go's default (GOGC=400), which saves a fifth of the service's CPU; near it, it collects harder. 0 = Go's defaults. GOMEMLIMIT and GOGC in the environment win (${env})."`

	Dev       devCmd       `cmd:"" help:"Run a sandbox: embedded Kafka broker, PostgreSQL, sample traffic, the whole pipeline."`
	Run       runCmd       `cmd:"" help:"Run the service: consumers, outbox relay, /livez and /readyz."`
	Migrate   migrateCmd   `cmd:"" help:"Apply the embedded schema migrations with the owner's credentials."`
	Produce   produceCmd   `cmd:"" help:"Publish JSON lines from a file or stdin to a topic, keyed tenant_id/subject."`
	Balance   balanceCmd   `cmd:"" help:"Show a tenant's accounts: balance, holds, available, chains and the rows behind them."`
	Statement statementCmd `cmd:"" help:"A tenant's statement for one period: per account and currency the opening balance, charges by meter, corrections, refunds, reclaims, holds, grants and the closing balance, each tied to its ledger rows."`
	Period    periodCmd    `cmd:"" help:"Close a period (its later records are flagged late)."`
	Conflicts conflictsCmd `cmd:"" help:"Analysts' conflict cases: list, show, diff, resolve, export."`
	Explain   explainCmd   `cmd:"" help:"The whole history of one record: operations, deliveries, ledger rows, links, publication, cases."`
	Dlq       dlqCmd       `cmd:"" help:"Inspect and replay dead letters."`
	Bench     benchCmd     `cmd:"" help:"Benchmark: a generated workload end to end, core-only and against baselines, with the exactly-once checks; writes JSON, Markdown and PNG plots."`
	Reconcile reconcileCmd `cmd:"" help:"Check invariants (balances, one effect per identity, outbox published, offsets) and compare the topics with what was settled; exit 3 when anything is found."`
}

// app is what every command's Run receives: the process's context (ended
// by SIGINT or SIGTERM), its output streams and its logger.
type app struct {
	ctx    context.Context
	stdout io.Writer
	stderr io.Writer
	log    *slog.Logger
}

// usageError is a mistake in how the command was called: exit code 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// exitError carries a specific exit code (e.g. 3 for a discrepancy).
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

// tuneGC trades memory for CPU up to a soft limit (see --memory-limit-mib),
// unless the environment already tunes the garbage collector.
func tuneGC(limitMiB int64) {
	if limitMiB <= 0 || os.Getenv("GOMEMLIMIT") != "" || os.Getenv("GOGC") != "" {
		return
	}
	debug.SetMemoryLimit(limitMiB << 20)
	debug.SetGCPercent(400)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run parses args and runs the command, returning the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var c cli
	exited, exitCode := false, 0
	parser, err := kong.New(&c,
		kong.Name("settle"),
		kong.Description("settle consumes usage records from Kafka, settles each exactly once in PostgreSQL, and publishes the results.\n\n"+
			"Every flag can also be set by the environment variable shown beside it; a flag beats the environment, which beats the default."),
		kong.Writers(stdout, stderr),
		kong.Exit(func(code int) { exited, exitCode = true, code }),
		kong.UsageOnError(),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true}),
	)
	if err != nil {
		fmt.Fprintf(stderr, "settle: %v\n", err)
		return exitFailure
	}
	kctx, err := parser.Parse(args)
	if exited { // --help
		if exitCode != 0 {
			return exitUsage
		}
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "settle: %v\n", err)
		return exitUsage
	}
	tuneGC(c.MemoryLimitMiB)
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.LogLevel))
	a := &app{ctx: ctx, stdout: stdout, stderr: stderr,
		log: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))}
	err = kctx.Run(a)
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "settle %s: %v\n", strings.Fields(kctx.Command())[0], err)
	var ue usageError
	var ee exitError
	switch {
	case errors.As(err, &ue):
		return exitUsage
	case errors.As(err, &ee):
		return ee.code
	}
	return exitFailure
}
