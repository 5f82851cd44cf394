#!/usr/bin/env bash
# MirrorMaker 2 properties for one direction, A (source) -> B (target), single-node clusters:
#   interop/kafka/mm2-properties.sh SOURCE_BOOTSTRAP TARGET_BOOTSTRAP TOPICS_REGEX [LINE...]
# Extra LINEs (k = v) are appended, e.g. the identity replication policy or tasks.max.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 SOURCE TARGET TOPICS [LINE...]" >&2; exit 2; }
cat <<PROPS
clusters = A, B
A.bootstrap.servers = $1
B.bootstrap.servers = $2
A->B.enabled = true
A->B.topics = $3
B->A.enabled = false
replication.factor = 1
checkpoints.topic.replication.factor = 1
heartbeats.topic.replication.factor = 1
offset-syncs.topic.replication.factor = 1
offset.storage.replication.factor = 1
status.storage.replication.factor = 1
config.storage.replication.factor = 1
sync.group.offsets.enabled = true
sync.group.offsets.interval.seconds = 5
emit.checkpoints.interval.seconds = 5
refresh.topics.interval.seconds = 5
refresh.groups.interval.seconds = 5
plugin.discovery = service_load
PROPS
shift 3
for line in "$@"; do echo "$line"; done
