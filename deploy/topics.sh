#!/bin/sh
# Creates settle's topics, or brings an existing topic's retention and
# cleanup policy to the table below: the one place they are set
# (docs/operations.md, "Topics and retention", says why each value).
# Run with Kafka's own tools on the path (the apache/kafka image has them):
#   KAFKA_BROKERS=host:9092 [KAFKA_CLIENT_CONFIG=client.properties] [PARTITIONS=6] deploy/topics.sh
# compose.yaml runs it before the service starts. Never compaction: every
# topic is keyed (settlements by account), and compaction keeps only a
# key's newest message, which would cut every account's gapless sequence.
set -eu

: "${KAFKA_BROKERS:?set KAFKA_BROKERS to the seed brokers}"
PARTITIONS="${PARTITIONS:-6}"
BIN="${KAFKA_BIN:-/opt/kafka/bin}"
set -- --bootstrap-server "$KAFKA_BROKERS"
if [ -n "${KAFKA_CLIENT_CONFIG:-}" ]; then
	set -- "$@" --command-config "$KAFKA_CLIENT_CONFIG"
fi

# topic          cleanup.policy  retention.ms   retention.bytes
TOPICS='
usage            delete          3888000000     -1
usage.results    delete          604800000      -1
usage.dlq        delete          2592000000     -1
settlements      delete          -1             -1
'

echo "$TOPICS" | while read -r topic policy ms bytes; do
	[ -n "$topic" ] || continue
	configs="cleanup.policy=$policy,retention.ms=$ms,retention.bytes=$bytes"
	"$BIN/kafka-topics.sh" "$@" --create --if-not-exists --topic "$topic" --partitions "$PARTITIONS" \
		--config "cleanup.policy=$policy" --config "retention.ms=$ms" --config "retention.bytes=$bytes"
	# An existing topic keeps its partitions (adding some would move
	# accounts to other partitions) and takes the table's settings.
	"$BIN/kafka-configs.sh" "$@" --alter --entity-type topics --entity-name "$topic" --add-config "$configs"
	echo "topic $topic: $configs"
done
