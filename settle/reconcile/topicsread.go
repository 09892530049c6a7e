package reconcile

// Reading what month end compares with the database from the topics: the
// consumer group's offsets, the usage topic's records and the settlements
// topic's messages of one tenant and period.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/settlehq/settle/internal/kafkahdr"
	"github.com/settlehq/settle/internal/kafkaread"
	"github.com/settlehq/settle/record"
	"github.com/settlehq/settle/settle/message"
)

// TopicsToRead says what ReadTopics reads: the brokers (Opts carries the
// client's security and logging options), the consumer group whose
// offsets are compared, and for a tenant and period the usage topic (its
// records decoded by Decoder) and the settlements topic.
type TopicsToRead struct {
	Brokers                      []string
	Opts                         []kgo.Opt
	Group                        string
	TenantID, Period             string
	UsageTopic, SettlementsTopic string
	Decoder                      *record.Decoder
}

// ErrBrokers marks brokers a client cannot be made for: the caller's
// settings are wrong.
var ErrBrokers = errors.New("no client for these brokers")

// ReadTopics fills in what Run compares with the topics: the group's Kafka
// offsets (none committed: the check is reported not run, naming the
// group, never passed) and, for a tenant and period, the usage and
// settlements topics' records of it, each topic read from its start to
// the end offsets listed when the read begins. ctx bounds the read.
func ReadTopics(ctx context.Context, t TopicsToRead, in *Input) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(t.Brokers...)}, t.Opts...)...)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBrokers, err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	offs, err := adm.FetchOffsets(ctx, t.Group)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return fmt.Errorf("fetch the offsets of group %s from %v: %w", t.Group, t.Brokers, err)
	}
	got := map[string]map[int32]int64{}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Err == nil && o.At >= 0 {
			if got[o.Topic] == nil {
				got[o.Topic] = map[int32]int64{}
			}
			got[o.Topic][o.Partition] = o.At
		}
	})
	if len(got) == 0 {
		in.KafkaOffsetsNotRead = fmt.Sprintf("consumer group %q has no committed offsets in Kafka (check --group)", t.Group)
	} else {
		in.KafkaOffsets = got
	}
	if t.TenantID == "" || t.Period == "" {
		return nil
	}
	starts, err := readTopic(ctx, t.Brokers, t.Opts, t.UsageTopic, func(r *kgo.Record) {
		rec, err := t.Decoder.Decode(r.Value, kafkahdr.FromKafka(r.Headers))
		if err != nil || rec.TenantID != t.TenantID || rec.AccountPeriod != t.Period {
			return // a dead letter, or another tenant's or period's
		}
		in.Source = append(in.Source, SourceRecord{Source: message.Coordinates{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset},
			RecordID: rec.RecordID, Operation: string(rec.Kind)})
	})
	if err != nil {
		return err
	}
	in.SourceRead, in.SourceStart = true, starts
	_, err = readTopic(ctx, t.Brokers, t.Opts, t.SettlementsTopic, func(r *kgo.Record) {
		var resp message.Response
		if json.Unmarshal(r.Value, &resp) != nil || resp.Identity.TenantID != t.TenantID || resp.Identity.AccountPeriod != t.Period {
			return
		}
		header := ""
		for _, h := range r.Headers {
			if h.Key == "settlement_id" {
				header = string(h.Value)
			}
		}
		in.Published = append(in.Published, PublishedSettlement{SettlementID: resp.SettlementID,
			RecordID: resp.Identity.RecordID, Operation: resp.Identity.Operation,
			Source:             message.Coordinates{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset},
			HeaderSettlementID: header, Sequence: resp.Sequence})
	})
	if err != nil {
		return err
	}
	in.PublishedRead = true
	return nil
}

// readTopic reads topic whole (kafkaread.ToEnd), calling fn for every
// record, and returns each partition's start offset (records before it
// left by retention); its errors say which flag to look at.
func readTopic(ctx context.Context, brokers []string, kopts []kgo.Opt, topic string, fn func(*kgo.Record)) (map[int32]int64, error) {
	o, err := kafkaread.ToEnd(ctx, brokers, kopts, topic, fn)
	switch {
	case errors.Is(err, kafkaread.ErrNoTopic):
		return nil, fmt.Errorf("%w (check --topic / --settlements-topic)", err)
	case ctx.Err() != nil:
		return nil, fmt.Errorf("%w (allow the read more time: --read-timeout)", err)
	case err != nil:
		return nil, err
	}
	return o.Starts, nil
}
