#!/bin/bash
# Provision a kafka-chaos node: Java 17 for Kafka, iptables for the nemeses,
# and root login with the key Vagrant installed for the `vagrant` user (the
# harness acts as root, like on local and inventory nodes).
# Usage: provision.sh SUBNET NODES
set -euo pipefail
subnet="$1"
nodes="$2"

# The locally built box (build-box.sh) has them all; a stock box needs apt.
if ! command -v java >/dev/null || ! command -v iptables >/dev/null || ! command -v pgrep >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends openjdk-17-jre-headless iptables procps
fi

install -d -m 700 /root/.ssh
install -m 600 /home/vagrant/.ssh/authorized_keys /root/.ssh/authorized_keys
sed -i -E 's/^#?PermitRootLogin .*/PermitRootLogin prohibit-password/' /etc/ssh/sshd_config
systemctl reload ssh

# every node resolves every other node by name
sed -i '/# kafka-chaos$/d' /etc/hosts
for i in $(seq 1 "$nodes"); do
  echo "$subnet.$((10 + i)) n$i # kafka-chaos" >> /etc/hosts
done
install -d -m 755 /var/lib/kafka-chaos
