package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/internal/proctest"
	"github.com/settlehq/settle/internal/testnet"
	"github.com/settlehq/settle/settle/settletest"
)

// portFree reports whether addr can be listened on now.
func portFree(addr string) bool {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// waitOutput waits until the process's stdout matches every pattern, or
// fails after timeout (or when the process exits first).
func waitOutput(t *testing.T, p *proctest.Process, timeout time.Duration, patterns ...*regexp.Regexp) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		out := p.Stdout()
		ok := true
		for _, re := range patterns {
			ok = ok && re.MatchString(out)
		}
		if ok {
			return out
		}
		if p.Exited() {
			t.Fatalf("settle %s exited (code %d) before printing %v; stdout:\n%s", p.Name, p.ExitCode(0), patterns, out)
		}
		if time.Now().After(deadline) {
			t.Fatalf("settle %s did not print %v within %s; stdout:\n%s", p.Name, patterns, timeout, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestFreshUser runs the README's first command exactly as written there
// (`go run ./cmd/settle dev`, in the repository, no flags, no environment
// of ours), and expects it to print every sample record's outcome —
// settled, duplicate, quarantined and dead-lettered among them — and the
// README's build command among its hints, then to stop cleanly on Ctrl-C
// (SIGINT to its process group, as a terminal sends it) with exit code 0.
//
// Two things differ from a new user's run, so that the test touches nothing
// it did not make: the sandbox's database is one of the test's own, on the
// test server (a user's `settle_dev` on the machine's server is left
// alone), and when the defaults' ports (9092, 8080) are taken on this
// machine (a developer's own `settle dev`), it moves to free ports.
func TestFreshUser(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	tryIt, build := readmeCommands(t, root)
	argv := strings.Fields(tryIt[0])
	if len(argv) < 3 || argv[0] != "go" || argv[1] != "run" {
		t.Fatalf("the README's first command is %q: this test runs a `go run ...` command", tryIt[0])
	}
	db := fmt.Sprintf("settle_e2e_fresh_%d", os.Getpid())
	env := []string{"SETTLE_DATABASE_URL=" + settletest.ServerURL(), "DATABASE_URL=" + settletest.ServerURL(), "SETTLE_DEV_DATABASE=" + db}
	t.Cleanup(func() { dropDatabase(db) })
	if !portFree("127.0.0.1:9092") || !portFree("127.0.0.1:8080") {
		env = append(env, "SETTLE_DEV_KAFKA_ADDR="+testnet.FreeAddr(t), "SETTLE_ADMIN_ADDR="+testnet.FreeAddr(t))
		t.Logf("127.0.0.1:9092 or :8080 is taken: running settle dev with %v", env)
	}
	began := time.Now()
	p := proctest.Start(t, proctest.Options{Name: "dev", Bin: argv[0], Args: argv[1:], Env: env, Dir: root, Group: true})
	line := func(outcome string) *regexp.Regexp {
		return regexp.MustCompile(`(?m)^\s+\d+\s+.+ -> ` + outcome + `\b`)
	}
	out := waitOutput(t, p, 3*time.Minute, regexp.MustCompile(`the sample, record by record`),
		line("settled"), line("duplicate"), line("quarantined"), line("dead_lettered"),
		regexp.MustCompile(`(?m)^\s+16 records: `), regexp.MustCompile(`try next`))
	t.Logf("settle dev showed every outcome %s after start:\n%s", time.Since(began).Round(time.Millisecond), out)
	if !strings.Contains(out, build) {
		t.Errorf("settle dev's hints do not give the README's build command %q:\n%s", build, out)
	}
	if bin := buildLine.FindStringSubmatch(build)[1]; !strings.Contains(out, "  "+bin+" conflicts list") {
		t.Errorf("settle dev's hints do not call %s, the binary the README builds:\n%s", bin, out)
	}
	signal(t, p, syscall.SIGINT)
	if code := p.ExitCode(30 * time.Second); code != 0 {
		t.Errorf("settle dev after SIGINT: exit %d, want 0", code)
	}
}

// kcatMessage is one message as `kcat -J` prints it.
type kcatMessage struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Key       string `json:"key"`
	Payload   string `json:"payload"`
}

// kcat runs kcat with args (and stdin), failing the test on error.
func kcat(t *testing.T, bin string, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.String()
}

// kcatRead reads topic from the beginning to its end with kcat, again and
// again until cond holds of what it read (or 30 s pass).
func kcatRead(t *testing.T, bin, broker, topic string, cond func([]kcatMessage) bool) []kcatMessage {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var msgs []kcatMessage
		sc := bufio.NewScanner(strings.NewReader(kcat(t, bin, "", "-b", broker, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-J")))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m kcatMessage
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Fatalf("kcat -J line %q: %v", sc.Text(), err)
			}
			msgs = append(msgs, m)
		}
		if cond(msgs) {
			return msgs
		}
		if time.Now().After(deadline) {
			t.Fatalf("kcat read %d messages from %s, not what was expected: %+v", len(msgs), topic, msgs)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestKcatInterop: a client that is not franz-go (kcat, librdkafka) lists
// the metadata of the broker `settle dev` starts, produces usage records
// to it keyed like our producers (murmur2 partitioner), and reads back the
// settlements and results they led to. A record produced by franz-go under
// the same key lands on the same partition.
func TestKcatInterop(t *testing.T) {
	t.Parallel()
	bin, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("kcat is not installed, and CI is set: .ci/run installs it (apt-get install kcat)")
		}
		t.Skip("kcat is not installed (apt-get install kcat); CI runs this test")
	}
	broker, admin := testnet.FreeAddr(t), testnet.FreeAddr(t)
	db := fmt.Sprintf("settle_e2e_kcat_%d", os.Getpid())
	t.Cleanup(func() { dropDatabase(db) })
	p := startSettle(t, "dev-kcat", nil, "dev", "--kafka-addr", broker, "--admin-addr", admin,
		"--database-url", settletest.ServerURL(), "--database", db, "--no-sample")
	waitOutput(t, p, time.Minute, regexp.MustCompile(`try next`))

	// Metadata: the pipeline's topics, usage with 6 partitions.
	var md struct {
		Topics []struct {
			Topic      string            `json:"topic"`
			Partitions []json.RawMessage `json:"partitions"`
		} `json:"topics"`
	}
	if err := json.Unmarshal([]byte(kcat(t, bin, "", "-b", broker, "-L", "-J")), &md); err != nil {
		t.Fatalf("kcat -L -J: %v", err)
	}
	parts := map[string]int{}
	for _, tp := range md.Topics {
		parts[tp.Topic] = len(tp.Partitions)
	}
	for topic, want := range map[string]int{"usage": 6, "usage.results": 1, "usage.dlq": 1, "settlements": 1} {
		if parts[topic] != want {
			t.Errorf("kcat -L: topic %s has %d partitions, want %d (all: %v)", topic, parts[topic], want, parts)
		}
	}

	period := time.Now().UTC().Format("2006-01")
	rec := func(id, kind, amount string) string {
		extra := ""
		if kind == "usage" {
			extra = `,"meter":"gpu_seconds","quantity":"` + amount + `","unit":"s","finalization_version":1`
		}
		return `{"tenant_id":"kcat","account_period":"` + period + `","record_id":"` + id + `","kind":"` + kind +
			`","subject":"cust-k","amount":"` + amount + `","currency":"USD","occurred_at":"` + time.Now().UTC().Format(time.RFC3339) + `"` + extra + `}`
	}
	lines := []string{rec("kg-1", "grant", "10"), rec("ku-1", "usage", "2.5"), rec("ku-1", "usage", "2.50")}
	var in strings.Builder
	for _, l := range lines {
		in.WriteString("kcat/cust-k|" + l + "\n")
	}
	kcat(t, bin, in.String(), "-b", broker, "-P", "-t", "usage", "-K", "|", "-X", "topic.partitioner=murmur2_random")

	// The same key from franz-go's default (murmur2) partitioner.
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "usage", Key: []byte("kcat/cust-k"), Value: []byte(rec("kg-2", "grant", "1"))}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// Settlements: one per settled record (kg-1, ku-1, kg-2), none for the duplicate.
	type settlement struct {
		SettlementID string `json:"settlement_id"`
		Identity     struct {
			TenantID string `json:"tenant_id"`
			RecordID string `json:"record_id"`
		} `json:"identity"`
		BalanceAfter string `json:"balance_after"`
	}
	ours := func(msgs []kcatMessage) map[string]settlement {
		out := map[string]settlement{}
		for _, m := range msgs {
			var s settlement
			if json.Unmarshal([]byte(m.Payload), &s) == nil && s.Identity.TenantID == "kcat" {
				out[s.Identity.RecordID] = s
			}
		}
		return out
	}
	msgs := kcatRead(t, bin, broker, "settlements", func(m []kcatMessage) bool { return len(ours(m)) >= 3 })
	got := ours(msgs)
	for _, id := range []string{"kg-1", "ku-1", "kg-2"} {
		if got[id].SettlementID == "" {
			t.Errorf("settlements read by kcat: no settlement for %s: %+v", id, got)
		}
	}
	if b := got["ku-1"].BalanceAfter; b != "7.5" && b != "7.50" {
		t.Errorf("settlement of ku-1: balance_after %q, want 7.5", b)
	}

	// Results: one per input record, the repeat a duplicate; and the
	// franz-go record on kcat's partition.
	type result struct {
		Source struct {
			Partition int32 `json:"partition"`
		} `json:"source"`
		Identity *struct {
			TenantID string `json:"tenant_id"`
			RecordID string `json:"record_id"`
		} `json:"identity"`
		Outcome string `json:"outcome"`
	}
	results := func(msgs []kcatMessage) []result {
		var out []result
		for _, m := range msgs {
			var r result
			if json.Unmarshal([]byte(m.Payload), &r) == nil && r.Identity != nil && r.Identity.TenantID == "kcat" {
				out = append(out, r)
			}
		}
		return out
	}
	rs := results(kcatRead(t, bin, broker, "usage.results", func(m []kcatMessage) bool { return len(results(m)) >= 4 }))
	outcomes := map[string][]string{}
	partitions := map[int32]bool{}
	for _, r := range rs {
		outcomes[r.Identity.RecordID] = append(outcomes[r.Identity.RecordID], r.Outcome)
		partitions[r.Source.Partition] = true
	}
	if fmt.Sprint(outcomes["ku-1"]) != "[settled duplicate]" || fmt.Sprint(outcomes["kg-1"]) != "[settled]" || fmt.Sprint(outcomes["kg-2"]) != "[settled]" {
		t.Errorf("results read by kcat: %v, want kg-1 settled, ku-1 settled then duplicate, kg-2 settled", outcomes)
	}
	if len(partitions) != 1 {
		t.Errorf("key kcat/cust-k landed on partitions %v from kcat (murmur2_random) and franz-go: want one", partitions)
	}
	signal(t, p, syscall.SIGINT)
	if code := p.ExitCode(30 * time.Second); code != 0 {
		t.Errorf("settle dev after SIGINT: exit %d, want 0", code)
	}
}
