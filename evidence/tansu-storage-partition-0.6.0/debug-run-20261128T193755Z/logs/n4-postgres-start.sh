#!/bin/sh
# written by kafka-chaos (harness/postgres_db.py)
export KAFKA_CHAOS_ROOT=/var/lib/kafka-chaos/clusters/h40s/nodes/n4
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
alive() { s=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' /proc/$1/status 2>/dev/null); [ -n "$s" ] && [ "$s" != Z ]; }; 
for lock in /var/lib/kafka-chaos/clusters/h40s/nodes/n4/data/postgres/postmaster.pid /var/lib/kafka-chaos/clusters/h40s/nodes/n4/run/postgres/.s.PGSQL.*.lock; do old=$(head -n 1 "$lock" 2>/dev/null); case "$old" in ""|*[!0-9]*) continue;; esac; alive "$old" || rm -f "$lock"; done
echo $$ > /var/lib/kafka-chaos/clusters/h40s/nodes/n4/run/postgres.pid
exec setpriv --reuid=postgres --regid=postgres --init-groups "$bin/postgres" -D /var/lib/kafka-chaos/clusters/h40s/nodes/n4/data/postgres -p 5432 -c listen_addresses=10.251.1.14 -c unix_socket_directories=/var/lib/kafka-chaos/clusters/h40s/nodes/n4/run/postgres -c logging_collector=off -c log_line_prefix='%m [%p] ' -c log_statement=mod -c log_lock_waits=on -c deadlock_timeout=100ms -c log_connections=on -c log_disconnections=on -c 'log_line_prefix=%m [%p] %v %x '
