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
	"strings"
	"syscall"

	"github.com/alecthomas/kong"

	"github.com/settlehq/settle/service"
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
	HelpAll        helpAllFlag `name:"help-all" help:"Show every flag, the rarely changed ones too."`
	LogLevel       string      `name:"log-level" env:"SETTLE_LOG_LEVEL" default:"info" enum:"debug,info,warn,error" help:"debug, info, warn or error."`
	MemoryLimitMiB int64       `name:"memory-limit-mib" env:"SETTLE_MEMORY_LIMIT_MIB" default:"384" hidden:"" help:"Soft memory limit of the process in MiB: below it the garbage collector runs 4x less often than Go's default (GOGC=400), which saves a fifth of the service's CPU; near it, it collects harder. 0 = Go's defaults. GOMEMLIMIT and GOGC in the environment win."`

	Dev       devCmd       `cmd:"" help:"A sandbox: embedded broker, PostgreSQL, sample traffic."`
	Run       runCmd       `cmd:"" help:"Run the service: consumer, outbox relay, admin listener."`
	Migrate   migrateCmd   `cmd:"" help:"Apply the schema migrations (as the schema owner)."`
	Produce   produceCmd   `cmd:"" help:"Publish JSON lines (a file or stdin) to the usage topic."`
	Balance   balanceCmd   `cmd:"" help:"A tenant's accounts: balances, holds, ledger rows."`
	Statement statementCmd `cmd:"" help:"A tenant's statement of a period, tied to ledger rows."`
	Period    periodCmd    `cmd:"" help:"Close a period (its later records are flagged late)."`
	Conflicts conflictsCmd `cmd:"" help:"Analysts' conflict cases: list, show, diff, resolve, export."`
	Explain   explainCmd   `cmd:"" help:"The whole history of one record."`
	Dlq       dlqCmd       `cmd:"" help:"Inspect and replay dead letters."`
	Reconcile reconcileCmd `cmd:"" help:"Check invariants and topics; exit 3 on findings."`
	Verify    verifyCmd    `cmd:"" help:"Check the settlements topic alone; exit 3 on findings."`
	Canary    canaryCmd    `cmd:"" help:"Run the delivery scenarios live; exit 3 on a failure."`
	Prune     pruneCmd     `cmd:"" help:"Remove operational history; --dry-run counts."`
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
			"Each flag can also be set by the environment variable shown beside it (of two, the first set wins); a flag beats the environment, which beats the default. --help-all shows the rarely changed flags too."),
		kong.Writers(stdout, stderr),
		kong.Exit(func(code int) { exited, exitCode = true, code }),
		kong.UsageOnError(),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true}),
		kong.Help(helpPrinter),
	)
	if err != nil {
		fmt.Fprintf(stderr, "settle: %v\n", err)
		return exitFailure
	}
	if len(args) == 0 {
		printShortUsage(stderr, parser)
		return exitUsage
	}
	kctx, err := parser.Parse(args)
	if exited { // --help
		if exitCode != 0 {
			return exitUsage
		}
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "settle: %v; %s\n", err, helpHint(err))
		return exitUsage
	}
	service.TuneGC(c.MemoryLimitMiB)
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
