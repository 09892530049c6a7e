package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// kafkaSecurityFlags are the broker connection's TLS and SASL settings.
// The password is read from the environment or a file in production (a
// flag shows in the process list); it is never logged.
type kafkaSecurityFlags struct {
	KafkaTLS           bool   `name:"kafka-tls" hidden:"" env:"SETTLE_KAFKA_TLS" help:"Connect to the brokers over TLS (implied by --kafka-tls-ca or a client certificate)."`
	KafkaTLSCA         string `name:"kafka-tls-ca" hidden:"" env:"SETTLE_KAFKA_TLS_CA" type:"path" help:"PEM file of the CA that signed the brokers' certificates; empty = the system roots."`
	KafkaTLSCert       string `name:"kafka-tls-cert" hidden:"" env:"SETTLE_KAFKA_TLS_CERT" type:"path" help:"PEM client certificate for mutual TLS, with --kafka-tls-key."`
	KafkaTLSKey        string `name:"kafka-tls-key" hidden:"" env:"SETTLE_KAFKA_TLS_KEY" type:"path" help:"PEM private key of --kafka-tls-cert."`
	KafkaTLSServerName string `name:"kafka-tls-server-name" hidden:"" env:"SETTLE_KAFKA_TLS_SERVER_NAME" help:"Name to verify in the brokers' certificates; empty = the host of each broker address."`
	SASLMechanism      string `name:"kafka-sasl-mechanism" hidden:"" env:"SETTLE_KAFKA_SASL_MECHANISM" enum:",PLAIN,SCRAM-SHA-256,SCRAM-SHA-512" default:"" help:"SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; empty = no SASL."`
	SASLUser           string `name:"kafka-sasl-user" hidden:"" env:"SETTLE_KAFKA_SASL_USER" help:"SASL user name."`
	SASLPassword       string `name:"kafka-sasl-password" hidden:"" env:"SETTLE_KAFKA_SASL_PASSWORD" help:"SASL password; prefer the environment or --kafka-sasl-password-file over this flag."`
	SASLPasswordFile   string `name:"kafka-sasl-password-file" hidden:"" env:"SETTLE_KAFKA_SASL_PASSWORD_FILE" type:"path" help:"File holding the SASL password (a mounted secret)."`
}

// producer opens a client that produces to brokers with every in-sync
// replica acknowledging, with these security settings.
func (f kafkaSecurityFlags) producer(a *app, brokers []string, extra ...kgo.Opt) (*kgo.Client, error) {
	sec, err := f.clientOpts()
	if err != nil {
		return nil, err
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.RequiredAcks(kgo.AllISRAcks()), kafkaLogger(a)}, sec...)
	return kgo.NewClient(append(opts, extra...)...)
}

// clientOpts validates the settings and returns the franz-go options they
// mean. Errors say which flag to fix and never contain the password.
func (f kafkaSecurityFlags) clientOpts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if f.KafkaTLS || f.KafkaTLSCA != "" || f.KafkaTLSCert != "" || f.KafkaTLSKey != "" || f.KafkaTLSServerName != "" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.KafkaTLSServerName}
		if f.KafkaTLSCA != "" {
			pem, err := os.ReadFile(f.KafkaTLSCA)
			if err != nil {
				return nil, usageError{fmt.Sprintf("--kafka-tls-ca: %v", err)}
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, usageError{fmt.Sprintf("--kafka-tls-ca %s: no PEM certificate in it", f.KafkaTLSCA)}
			}
			cfg.RootCAs = pool
		}
		if (f.KafkaTLSCert == "") != (f.KafkaTLSKey == "") {
			return nil, usageError{"--kafka-tls-cert and --kafka-tls-key go together: give both for mutual TLS, or neither"}
		}
		if f.KafkaTLSCert != "" {
			cert, err := tls.LoadX509KeyPair(f.KafkaTLSCert, f.KafkaTLSKey)
			if err != nil {
				return nil, usageError{fmt.Sprintf("--kafka-tls-cert/--kafka-tls-key: %v", err)}
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		// A dialer per connection: the server name defaults to each
		// broker's own host, which a shared tls.Config cannot do.
		dialer := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second}, Config: cfg}
		opts = append(opts, kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			c := cfg.Clone()
			if c.ServerName == "" {
				if h, _, err := net.SplitHostPort(host); err == nil {
					c.ServerName = h
				}
			}
			d := *dialer
			d.Config = c
			return d.DialContext(ctx, network, host)
		}))
	}
	password := f.SASLPassword
	if f.SASLPasswordFile != "" {
		if password != "" {
			return nil, usageError{"--kafka-sasl-password and --kafka-sasl-password-file: give one, not both"}
		}
		b, err := os.ReadFile(f.SASLPasswordFile)
		if err != nil {
			return nil, usageError{fmt.Sprintf("--kafka-sasl-password-file: %v", err)}
		}
		password = strings.TrimRight(string(b), "\r\n")
	}
	mech := strings.ToUpper(f.SASLMechanism)
	if mech == "" {
		if f.SASLUser != "" || password != "" {
			return nil, usageError{"a SASL user or password is set but no --kafka-sasl-mechanism: choose PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"}
		}
		return opts, nil
	}
	if f.SASLUser == "" || password == "" {
		return nil, usageError{fmt.Sprintf("--kafka-sasl-mechanism %s needs --kafka-sasl-user and a password (SETTLE_KAFKA_SASL_PASSWORD or --kafka-sasl-password-file)", mech)}
	}
	switch mech {
	case "PLAIN":
		opts = append(opts, kgo.SASL(plain.Auth{User: f.SASLUser, Pass: password}.AsMechanism()))
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: f.SASLUser, Pass: password}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: f.SASLUser, Pass: password}.AsSha512Mechanism()))
	default:
		return nil, usageError{fmt.Sprintf("--kafka-sasl-mechanism %q: choose PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", f.SASLMechanism)}
	}
	return opts, nil
}
