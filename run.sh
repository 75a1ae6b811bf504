#!/usr/bin/env bash
# The main job: set up (idempotent), then a default chaos run - local 3-node
# KRaft cluster, newest Kafka, queue workload, kill and partition faults, 60 s.
# It ends by printing the report's path. Extra arguments go to `kafka-chaos run`.
set -euo pipefail
cd "$(dirname "$0")"
./setup.sh
exec kafka-chaos run "$@"
