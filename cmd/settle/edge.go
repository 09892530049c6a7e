package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/settlehq/settle/edge/ingest"
	"github.com/settlehq/settle/edge/webhook"
	"github.com/settlehq/settle/service"
)

// edgeFlags configure the HTTP edge: POST /v1/records on its own listener
// (package edge/ingest), and webhook delivery of settlements (package
// edge/webhook).
type edgeFlags struct {
	APIAddr            string        `name:"api-addr" hidden:"" env:"SETTLE_API_ADDR" default:"127.0.0.1:8081" help:"Listen address of the records API (POST /v1/records); loopback by default. Served only when --api-token is given."`
	APITokens          []string      `name:"api-token" env:"SETTLE_API_TOKENS" sep:"," help:"Serve the records API with these tokens, tenant=token,..."`
	APIBatchRecordsMax int           `name:"api-batch-records-max" hidden:"" env:"SETTLE_API_BATCH_RECORDS_MAX" default:"100" help:"Most records in one API request."`
	APIBodyBytesMax    int64         `name:"api-body-bytes-max" hidden:"" env:"SETTLE_API_BODY_BYTES_MAX" default:"1048576" help:"Largest API request body, in bytes."`
	APIGroupRequests   int           `name:"api-group-requests-max" hidden:"" env:"SETTLE_API_GROUP_REQUESTS_MAX" default:"64" help:"Most API requests committed as one group (one transaction for all of them)."`
	APIGroupsInFlight  int           `name:"api-groups-in-flight-max" hidden:"" env:"SETTLE_API_GROUPS_IN_FLIGHT_MAX" default:"2" help:"Most groups of API requests committing at once."`
	APISettleTimeout   time.Duration `name:"api-settle-timeout" hidden:"" env:"SETTLE_API_SETTLE_TIMEOUT" default:"10s" help:"Longest transaction of a group of API requests; past it they are answered 503 (retry) and nothing of them is written."`

	WebhookURL            string        `name:"webhook-url" env:"SETTLE_WEBHOOK_URL" help:"POST every settlement written from now on to this URL."`
	WebhookWorkers        int           `name:"webhook-workers" hidden:"" env:"SETTLE_WEBHOOK_WORKERS" default:"4" help:"Webhook deliveries sent at once."`
	WebhookAttemptsMax    int           `name:"webhook-attempts-max" hidden:"" env:"SETTLE_WEBHOOK_ATTEMPTS_MAX" default:"10" help:"Failed attempts of a webhook delivery (a non-2xx answer, or none within --webhook-request-timeout) before it is dead-lettered (table webhook_dead_letters)."`
	WebhookBackoffMin     time.Duration `name:"webhook-backoff-min" hidden:"" env:"SETTLE_WEBHOOK_BACKOFF_MIN" default:"1s" help:"Wait before the first webhook retry; it doubles per attempt."`
	WebhookBackoffMax     time.Duration `name:"webhook-backoff-max" hidden:"" env:"SETTLE_WEBHOOK_BACKOFF_MAX" default:"5m" help:"Longest wait between webhook retries."`
	WebhookLease          time.Duration `name:"webhook-lease" hidden:"" env:"SETTLE_WEBHOOK_LEASE" default:"30s" help:"How long a webhook attempt owns its delivery; it is renewed right before each POST, and past it another attempt takes the delivery over."`
	WebhookSendCanary     bool          `name:"webhook-send-canary" hidden:"" env:"SETTLE_WEBHOOK_SEND_CANARY" help:"Also POST the canary tenant's settlements (default: marked done unsent)."`
	WebhookRequestTimeout time.Duration `name:"webhook-request-timeout" hidden:"" env:"SETTLE_WEBHOOK_REQUEST_TIMEOUT" help:"Longest webhook POST, answer included; at most nine tenths of --webhook-lease (default a third of it)."`
}

// webhookConfig is the webhook delivery the flags ask for.
func (f edgeFlags) webhookConfig(a *app, settlementsTopic string) webhook.Config {
	return webhook.Config{URL: f.WebhookURL, Topic: settlementsTopic,
		Workers: f.WebhookWorkers, AttemptsMax: f.WebhookAttemptsMax, BackoffMin: f.WebhookBackoffMin,
		BackoffMax: f.WebhookBackoffMax, Lease: f.WebhookLease, RequestTimeout: f.WebhookRequestTimeout, SendCanary: f.WebhookSendCanary, Logger: a.log}
}

// check reports a webhook setting that cannot work before anything
// connects, so the mistake is reported at once with the flag to fix.
func (f edgeFlags) check(a *app) error {
	if f.WebhookURL == "" {
		return nil
	}
	if err := f.webhookConfig(a, "").Validate(); err != nil {
		return usageError{err.Error()}
	}
	return nil
}

// apply sets the edge of cfg as the flags ask: the records API (served
// when --api-token gives tokens) and webhook delivery (when --webhook-url
// is set).
func (f edgeFlags) apply(cfg *service.Config, a *app, settlementsTopic string) error {
	if len(f.APITokens) > 0 {
		tokens := map[string]string{}
		for _, tt := range f.APITokens {
			tenant, token, ok := strings.Cut(tt, "=")
			if !ok || tenant == "" || token == "" {
				return usageError{fmt.Sprintf("--api-token %q: write tenant=token", redactToken(tt))}
			}
			tokens[token] = tenant
		}
		cfg.APIAddr = f.APIAddr
		cfg.API = ingest.Config{Tokens: tokens, BatchRecordsMax: f.APIBatchRecordsMax,
			BodyBytesMax: f.APIBodyBytesMax, SettleTimeout: f.APISettleTimeout,
			GroupRequestsMax: f.APIGroupRequests, GroupsInFlightMax: f.APIGroupsInFlight, Logger: a.log}
	}
	if f.WebhookURL != "" {
		cfg.Webhook = f.webhookConfig(a, settlementsTopic)
	}
	return nil
}

func redactToken(tt string) string {
	if tenant, _, ok := strings.Cut(tt, "="); ok {
		return tenant + "=xxxxx"
	}
	return "xxxxx"
}
