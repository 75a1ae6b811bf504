#!/bin/sh
# written by kafka-chaos (harness/broker_tansu.py)
export KAFKA_CHAOS_ROOT=/var/lib/kafka-chaos/clusters/h40s/nodes/n3
export CLUSTER_ID=kafka-chaos
export LISTENER_URL=tcp://10.251.1.13:9092
export ADVERTISED_LISTENER_URL=tcp://10.251.1.13:9092
export STORAGE_ENGINE=postgres://postgres@10.251.1.14:5432/tansu
export RUST_LOG=warn,tansu_storage::sql=debug
export NO_COLOR=1
cd /var/lib/kafka-chaos/clusters/h40s/nodes/n3
echo $$ > /var/lib/kafka-chaos/clusters/h40s/nodes/n3/run/tansu.pid
exec /var/lib/kafka-chaos/clusters/h40s/nodes/n3/run/tansu broker --silent
