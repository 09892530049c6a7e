package faults

import (
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/settlehq/settle/internal/kafkatest"
)

// Broker is an in-process kfake cluster on loopback with the pipeline's
// topics, which the child processes reach over TCP.
type Broker struct {
	*kfake.Cluster
	Brokers []string
	opts    []kfake.Opt
	test    *kafkatest.Cluster // its test helpers (Produce) on the same addresses
}

// UsagePartitions is the partition count of the usage topic in these tests.
const UsagePartitions = 6

// NewBroker starts a cluster of n brokers (closed at cleanup). extra options
// (e.g. kfake.DataDir for a restartable broker) are appended.
func NewBroker(t testing.TB, n int, extra ...kfake.Opt) *Broker {
	t.Helper()
	k := kafkatest.NewCluster(t, UsagePartitions, append([]kfake.Opt{kfake.NumBrokers(n)}, extra...)...)
	c := k.Cluster
	b := &Broker{Cluster: c, Brokers: k.Brokers, opts: k.Opts, test: k}
	capRebalanceTimeout(c)
	t.Cleanup(func() { b.Cluster.Close() })
	return b
}

// RebalanceTimeoutMax caps the rebalance timeout members announce. The
// service asks for 60s (consumer.Config's default; `settle run` has no flag
// for it), and a member killed by SIGKILL holds every rebalance up for that
// long: a group waits the whole rebalance timeout for a member to rejoin,
// whatever its session timeout. The cap rewrites the JoinGroup request on
// its way in, like a broker-side limit; live members rejoin well inside it.
const RebalanceTimeoutMax = 3 * time.Second

func capRebalanceTimeout(c *kfake.Cluster) {
	c.ControlKey(int16(kmsg.JoinGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if j, ok := req.(*kmsg.JoinGroupRequest); ok && j.RebalanceTimeoutMillis > int32(RebalanceTimeoutMax/time.Millisecond) {
			j.RebalanceTimeoutMillis = int32(RebalanceTimeoutMax / time.Millisecond)
		}
		return nil, nil, false
	})
}

// Produce publishes records to the partitions they name (kafkatest's
// Produce: the addresses stay the broker's across a restart).
func (b *Broker) Produce(t testing.TB, recs []*kgo.Record) {
	t.Helper()
	b.test.Produce(t, recs...)
}

func listenTCP(addr string) (interface{ Close() error }, error) { return net.Listen("tcp", addr) }
