package service

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/settlehq/settle/consumer"
	"github.com/settlehq/settle/internal/kafkatest"
	"github.com/settlehq/settle/internal/testnet"
	"github.com/settlehq/settle/settle"
	"github.com/settlehq/settle/settle/settletest"
	"github.com/settlehq/settle/telemetry"
)

// TestProbesAsDocumented: /livez, /readyz (before the group is joined,
// and once ready) and /metrics of a running service answer as the OpenAPI
// document the admin listener serves describes them, statuses included.
// The analysts' routes beside them are analyst's TestOpenAPIDescribesEveryRoute.
func TestProbesAsDocumented(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k := kafkatest.NewCluster(t, 1)
	store := settletest.NewStore(t, settle.Config{})
	tel, err := telemetry.New(ctx, telemetry.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Store: store, Brokers: k.Brokers, AdminAddr: "127.0.0.1:0", Telemetry: tel,
		Consumer: consumer.Config{SessionTimeout: time.Second}, ShutdownTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	admin := "http://" + s.AdminAddr().String()
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	defer func() { cancel(); <-done }()

	_, raw := testnet.HTTPGet(admin + "/api/openapi.json")
	doc, err := openapi3.NewLoader().LoadFromData([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	doc.Servers = openapi3.Servers{{URL: admin}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	check := func(path string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", admin+path, nil)
		route, params, err := router.FindRoute(req)
		if err != nil {
			t.Fatalf("%s: not in the document: %v", path, err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true}
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req,
			PathParams: params, Route: route, Options: opts}, Status: resp.StatusCode, Header: resp.Header, Options: opts}
		out.SetBodyBytes(body)
		if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
			t.Errorf("%s: the %d answer breaks the document: %v\n%s", path, resp.StatusCode, err, body)
		}
		return resp.StatusCode
	}
	if code := check("/livez"); code != 200 {
		t.Errorf("/livez: %d", code)
	}
	check("/readyz") // 503 or 200, as the group joins: either as documented
	testnet.WaitFor(t, "/readyz 200", 20*time.Second, func() bool { return check("/readyz") == 200 })
	if code := check("/metrics"); code != 200 {
		t.Errorf("/metrics: %d", code)
	}
}
