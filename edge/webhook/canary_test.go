package webhook

import (
	"testing"

	"github.com/settlehq/settle/canary"
	"github.com/settlehq/settle/edge/edgetest"
	"github.com/settlehq/settle/settle/settletest"
)

// TestWebhookLeavesTheCanaryOut: a settlement of the canary tenant is
// marked done without a POST (status 0) unless Config.SendCanary, while
// another tenant's beside it is sent; with SendCanary it is sent too.
func TestWebhookLeavesTheCanaryOut(t *testing.T) {
	t.Parallel()
	for _, send := range []bool{false, true} {
		s, ws := newStores(t, 6)
		rc := newReceiver(t)
		wh := newWebhook(t, ws, rc.srv.URL, Config{SendCanary: send})
		settleAll(t, s, 0, usage("u-1", "cust-1", "3"), settletest.Clone(usage("u-canary", "canary", "1"), "tenant_id", canary.Tenant))
		drain(t, s, wh)
		seen, _ := rc.counts()
		want := 1
		if send {
			want = 2
		}
		if seen != want {
			t.Errorf("SendCanary %v: receiver saw %d POSTs, want %d", send, seen, want)
		}
		if !send {
			if got := edgetest.Count(t, s, `SELECT count(*)::int FROM webhook_deliveries WHERE tenant_id = '`+canary.Tenant+`' AND status = 'done' AND last_status = 0`); got != 1 {
				t.Errorf("canary deliveries done unsent: %d, want 1", got)
			}
		}
	}
}
