package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/settlehq/settle/internal/kafkatest"
	"github.com/settlehq/settle/internal/testnet"
	"github.com/settlehq/settle/settle/settletest"
	"github.com/settlehq/settle/telemetry"
)

// startService runs `settle args...` until the test ends; stop stops it (as
// SIGTERM would) and returns its exit code.
func startService(t *testing.T, args ...string) (out *testnet.SyncBuffer, stop func() int) {
	t.Helper()
	out = &testnet.SyncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, out, out) }()
	var once sync.Once
	code := -1
	stop = func() int {
		once.Do(func() {
			cancel()
			select {
			case code = <-done:
			case <-time.After(30 * time.Second):
				t.Errorf("settle %v did not stop within 30s", args[0])
			}
		})
		return code
	}
	t.Cleanup(func() { stop() })
	return out, stop
}

func opsRecord(id string, kv ...string) []byte {
	m := map[string]any{"tenant_id": "acme", "account_period": "2026-11", "record_id": id, "kind": "usage",
		"subject": "cust-1", "amount": "4", "currency": "USD", "meter": "gpu_seconds", "quantity": "4", "unit": "s",
		"occurred_at": "2026-11-03T10:00:00Z", "finalization_version": 1}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	b, _ := json.Marshal(m)
	return b
}

func produce(t *testing.T, brokers []string, opts []kgo.Opt, values ...[]byte) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for _, v := range values {
		recs = append(recs, &kgo.Record{Topic: "usage", Key: []byte("acme/cust-1"), Value: v})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// TestMetricsAndReadiness runs `settle run` against a broker and a database
// reached through a TCP proxy the test can cut. It checks that /metrics
// exposes every named series after a run (the retries from the outage
// included) and that /readyz turns 503 while PostgreSQL is unreachable and
// 200 again when it comes back, with the record produced meanwhile settled.
// settle_ready is 0 while the database is away with nothing to settle (it
// stayed 1: seen failing).
func TestMetricsAndReadiness(t *testing.T) {
	t.Parallel()
	broker := kafkatest.NewCluster(t, 2)
	t.Cleanup(broker.Close)
	brokers := broker.ListenAddrs()
	dbURL := settletest.NewDatabase(t)
	cfg, err := pgx.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	px := testnet.NewProxy(t, fmt.Sprintf("%s:%d", cfg.Host, cfg.Port))
	proxied := fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable&connect_timeout=2", px.Addr(), cfg.Database)
	admin := testnet.FreeAddr(t)
	out, stop := startService(t, "run", "--database-url", proxied, "--brokers", strings.Join(brokers, ","),
		"--admin-addr", admin, "--session-timeout", "1s", "--backoff-max", "200ms", "--shutdown-timeout", "10s")

	produce(t, brokers, nil, opsRecord("u-1"), opsRecord("u-1"), opsRecord("u-1", "amount", "5"), []byte("not json"),
		opsRecord("u-2"))
	testnet.WaitFor(t, "/readyz 200", 30*time.Second, func() bool { c, _ := testnet.HTTPGet("http://" + admin + "/readyz"); return c == 200 })
	testnet.WaitFor(t, "five records counted", 30*time.Second, func() bool {
		_, m := testnet.HTTPGet("http://" + admin + "/metrics")
		return strings.Contains(m, `settle_records_total{kind="usage",outcome="settled",reason=""} 2`) &&
			strings.Contains(m, `settle_records_total{kind="unknown",outcome="dead_lettered",reason="invalid_json"} 1`) &&
			strings.Contains(m, `outcome="quarantined"`) && strings.Contains(m, `outcome="duplicate"`)
	})

	px.Cut()
	testnet.WaitFor(t, "/readyz 503 with PostgreSQL cut off", 20*time.Second, func() bool {
		c, body := testnet.HTTPGet("http://" + admin + "/readyz")
		return c == http.StatusServiceUnavailable && strings.Contains(body, "database")
	})
	// The gauge says what /readyz says (it followed the consumer alone,
	// which had nothing to settle and stayed ready: settle_ready 1).
	testnet.WaitFor(t, "settle_ready 0 with PostgreSQL cut off", 20*time.Second, func() bool {
		_, m := testnet.HTTPGet("http://" + admin + "/metrics")
		return strings.Contains(m, "\nsettle_ready 0")
	})
	produce(t, brokers, nil, opsRecord("u-3"))
	testnet.WaitFor(t, "a retry counted during the outage", 20*time.Second, func() bool {
		_, m := testnet.HTTPGet("http://" + admin + "/metrics")
		return strings.Contains(m, `settle_retries_total{cause="database_unavailable"}`)
	})
	if c, _ := testnet.HTTPGet("http://" + admin + "/livez"); c != 200 {
		t.Errorf("/livez %d during the outage: the process is alive, only not ready", c)
	}
	px.Restore()
	testnet.WaitFor(t, "/readyz 200 after PostgreSQL is back", 30*time.Second, func() bool { c, _ := testnet.HTTPGet("http://" + admin + "/readyz"); return c == 200 })
	testnet.WaitFor(t, "the record produced during the outage settled", 30*time.Second, func() bool {
		_, m := testnet.HTTPGet("http://" + admin + "/metrics")
		return strings.Contains(m, `settle_records_total{kind="usage",outcome="settled",reason=""} 3`)
	})
	testnet.WaitFor(t, "outbox published and lag read", 15*time.Second, func() bool {
		_, m := testnet.HTTPGet("http://" + admin + "/metrics")
		return strings.Contains(m, `settle_outbox_published_total{topic="settlements"}`) &&
			strings.Contains(m, "settle_outbox_backlog 0") && strings.Contains(m, `settle_consumer_lag{partition=`)
	})
	_, m := testnet.HTTPGet("http://" + admin + "/metrics")
	for _, name := range []string{
		telemetry.MetricRecords, telemetry.MetricBatchRecords + "_bucket", telemetry.MetricTransaction + "_bucket",
		telemetry.MetricEndToEnd + "_bucket", telemetry.MetricRetries, telemetry.MetricDeadLetters,
		telemetry.MetricOutboxBacklog, telemetry.MetricOutboxOldestAge, telemetry.MetricOutboxPublished,
		telemetry.MetricConsumerLag, telemetry.MetricConflictCasesOpen, telemetry.MetricReady,
	} {
		if !strings.Contains(m, "\n"+name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	for _, want := range []string{"settle_conflict_cases_open 1", "settle_ready 1", `settle_dead_letters_total{reason="invalid_json"} 1`} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if code := stop(); code != exitOK {
		t.Errorf("exit %d after stop:\n%s", code, out.String())
	}
	// The same database, read by reconcile: clean, so exit 0.
	code, rout := runArgs(t, "reconcile", "--database-url", dbURL, "--brokers", strings.Join(brokers, ","),
		"--tenant", "acme", "--period", "2026-11", "--json")
	if code != exitOK {
		t.Errorf("reconcile after a clean run: exit %d\n%s", code, rout)
	}
	// Take a settlement out of the outbox (triggers off: it is append-only):
	// reconcile finds it, exit 3.
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	settletest.Bypass(t, conn, settletest.DropLastSettlement)
	code, rout = runArgs(t, "reconcile", "--database-url", dbURL)
	if code != exitMismatch || !strings.Contains(rout, "settlement_missing") {
		t.Errorf("reconcile with a settlement missing: exit %d, want 3 naming settlement_missing\n%s", code, rout)
	}
}

// TestSASLAndTLSSecretsNeverLogged runs the service against a broker that
// requires TLS and SCRAM-SHA-512, with a database URL that holds a
// password, at debug level: records settle, and neither password appears
// anywhere in the output. Bad settings are refused at start (exit 2) with
// the flag to fix, again without the password.
func TestSASLAndTLSSecretsNeverLogged(t *testing.T) {
	t.Parallel()
	const saslPassword, dbPassword = "sasl-Pa55-w0rd-xyz", "db-S3cret-pw-abc"
	dir := t.TempDir()
	caFile, serverTLS := selfSignedCA(t, dir)
	broker := kafkatest.NewCluster(t, 1, kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "settle", saslPassword), kfake.TLS(serverTLS))
	t.Cleanup(broker.Close)
	brokers := broker.ListenAddrs()
	// Trust authentication ignores the password, but it is in the URL the
	// service parses and reports on.
	cfg, _ := pgx.ParseConfig(settletest.NewDatabase(t))
	dbURL := fmt.Sprintf("postgres://postgres:%s@%s:%d/%s?sslmode=disable", dbPassword, cfg.Host, cfg.Port, cfg.Database)
	admin := testnet.FreeAddr(t)
	out, stop := startService(t, "--log-level", "debug", "run", "--database-url", dbURL, "--brokers", strings.Join(brokers, ","),
		"--admin-addr", admin, "--session-timeout", "1s", "--backoff-max", "200ms",
		"--kafka-tls-ca", caFile, "--kafka-sasl-mechanism", "SCRAM-SHA-512", "--kafka-sasl-user", "settle",
		"--kafka-sasl-password", saslPassword)

	pool := x509.NewCertPool()
	pem, _ := os.ReadFile(caFile)
	pool.AppendCertsFromPEM(pem)
	produce(t, brokers, []kgo.Opt{kgo.DialTLSConfig(&tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}),
		kgo.SASL(scram.Auth{User: "settle", Pass: saslPassword}.AsSha512Mechanism())}, opsRecord("u-1"), opsRecord("u-2"))
	testnet.WaitFor(t, "records settled over TLS+SCRAM", 30*time.Second, func() bool {
		_, m := testnet.HTTPGet("http://" + admin + "/metrics")
		return strings.Contains(m, `settle_records_total{kind="usage",outcome="settled",reason=""} 2`)
	})
	if code := stop(); code != exitOK {
		t.Errorf("exit %d:\n%s", code, out.String())
	}
	logs := out.String()
	for _, secret := range []string{saslPassword, dbPassword} {
		if strings.Contains(logs, secret) {
			t.Errorf("a secret appears in the output:\n%s", logs)
		}
	}

	// Refused at start, before connecting, with the flag to fix.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--kafka-sasl-mechanism", "SCRAM-SHA-256", "--kafka-sasl-user", "u"}, "needs --kafka-sasl-user and a password"},
		{[]string{"--kafka-sasl-user", "u", "--kafka-sasl-password", saslPassword}, "no --kafka-sasl-mechanism"},
		{[]string{"--kafka-sasl-mechanism", "GSSAPI"}, "--kafka-sasl-mechanism"},
		{[]string{"--kafka-tls-cert", caFile}, "--kafka-tls-cert and --kafka-tls-key go together"},
		{[]string{"--kafka-tls-ca", filepath.Join(dir, "missing.pem")}, "--kafka-tls-ca"},
		{[]string{"--otlp-endpoint", "collector:4318"}, "OTLP endpoint"},
		{[]string{"--database-url", "postgres://postgres:" + dbPassword + "@127.0.0.1:1/x?sslmode=verify-full&sslrootcert=/no/such/ca.pem"}, "--database-url"},
	} {
		args := append([]string{"run", "--brokers", "127.0.0.1:1", "--admin-addr", "127.0.0.1:0"}, tc.args...)
		if !contains(tc.args, "--database-url") {
			args = append(args, "--database-url", dbURL)
		}
		code, out := runArgs(t, args...)
		if code != exitUsage || !strings.Contains(out, tc.want) {
			t.Errorf("settle %v: exit %d, want 2 saying %q:\n%s", tc.args, code, tc.want, out)
		}
		for _, secret := range []string{saslPassword, dbPassword} {
			if strings.Contains(out, secret) {
				t.Errorf("settle %v: a secret appears in the output:\n%s", tc.args, out)
			}
		}
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// selfSignedCA writes a CA certificate to dir and returns its path and a
// server TLS config for 127.0.0.1 signed by it.
func selfSignedCA(t *testing.T, dir string) (string, *tls.Config) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "settle test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return caFile, &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}
