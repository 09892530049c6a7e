package message

// The default names of the pipeline's topics, the one place they are
// spelled: a deployment may name its own (settle run --topic and the hidden
// --results-topic, --settlements-topic, --dlq-topic).
const (
	// TopicUsage is the usage topic the consumer reads.
	TopicUsage = "usage"
	// TopicResults gets one result per input record.
	TopicResults = "usage.results"
	// TopicSettlements gets the settlements, relayed from the outbox.
	TopicSettlements = "settlements"
	// TopicDeadLetters gets the dead letters, relayed from the outbox.
	TopicDeadLetters = "usage.dlq"
)
