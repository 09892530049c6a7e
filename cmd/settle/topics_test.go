package main

import (
	"reflect"
	"testing"

	"github.com/settlehq/settle/settle/message"
)

// TestTopicFlagsDefaultToTheTopics: the topic flags' defaults (a struct
// tag, which kong reads, cannot name a constant) are the names
// settle/message defines, so the topics' default names have one source.
func TestTopicFlagsDefaultToTheTopics(t *testing.T) {
	want := map[string]string{"Topic": message.TopicUsage, "ResultsTopic": message.TopicResults,
		"SettlementsTopic": message.TopicSettlements, "DeadLetterTopic": message.TopicDeadLetters}
	typ := reflect.TypeFor[topicFlags]()
	for name, topic := range want {
		f, ok := typ.FieldByName(name)
		if !ok {
			t.Fatalf("topicFlags has no field %s", name)
		}
		if got := f.Tag.Get("default"); got != topic {
			t.Errorf("topicFlags.%s defaults to %q, want message's %q", name, got, topic)
		}
	}
	if f, _ := reflect.TypeFor[produceCmd]().FieldByName("Topic"); f.Tag.Get("default") != message.TopicUsage {
		t.Errorf("settle produce's --topic defaults to %q, want %q", f.Tag.Get("default"), message.TopicUsage)
	}
}
