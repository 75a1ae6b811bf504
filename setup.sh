#!/usr/bin/env bash
# Installs everything kafka-chaos needs on a fresh Debian machine, idempotently:
# system packages, the Python package and its dependencies, and the Kafka
# distributions from Maven Central. Needs root (the local backend creates
# network namespaces, bridges and iptables rules).
#
# Usage: ./setup.sh [--vagrant] [--tansu]
#   --vagrant  also install Vagrant, libvirt and QEMU, start libvirtd and build
#              the node box (vagrant/build-box.sh): only the vagrant backend
#              needs them, so the default path stays fast.
#   --tansu    also install PostgreSQL and build Tansu, a Kafka-compatible
#              broker (harness/tansu_build.py; cargo, cached; the build time is
#              printed): only --broker tansu needs them.
set -euo pipefail
cd "$(dirname "$0")"
with_vagrant=0
with_tansu=0
for arg in "$@"; do
  case "$arg" in
    --vagrant) with_vagrant=1 ;;
    --tansu) with_tansu=1 ;;
    *) echo "setup.sh: unknown option $arg (known: --vagrant, --tansu)" >&2; exit 2 ;;
  esac
done

if [ "$(id -u)" -ne 0 ]; then
  echo "setup.sh: must run as root (network namespaces, bridges, iptables need it)" >&2
  exit 1
fi

APT_PACKAGES=(openssh-server iptables iproute2 procps libfaketime chromium default-jdk-headless maven
  fuse3 libfuse3-dev libtoml11-dev libspdlog-dev cmake g++)
if [ "$with_vagrant" -eq 1 ]; then
  APT_PACKAGES+=(vagrant vagrant-libvirt libvirt-daemon-system libvirt-clients qemu-system-x86
    qemu-utils dnsmasq-base debootstrap extlinux)
fi
if [ "$with_tansu" -eq 1 ]; then
  APT_PACKAGES+=(postgresql)  # Tansu's shared storage
fi
missing=()
for p in "${APT_PACKAGES[@]}"; do
  # java and mvn may come from elsewhere (e.g. a preinstalled JDK); only install what is absent.
  # A JDK, not a JRE: javac builds the Java client's helper (workloads/java/jvm.py).
  case "$p" in
    default-jdk-headless) command -v javac >/dev/null && continue ;;
    maven) command -v mvn >/dev/null && continue ;;
  esac
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup.sh: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

python3 -m pip install -q -e '.[dev]'

# Warm the Kafka cache: the newest 4.x (default) and 3.9 (ZooKeeper mode).
kafka-chaos dist fetch 4.4.0 3.9.2

# Elle, Jepsen's cycle checker (Clojars only; KC_EXTRA_MAVEN_REPOS may name a
# mirror): resolved, then compiled into the cache. Without it every check but
# the cycle search still runs, so a machine that cannot resolve it gets a
# warning, not a failed setup.
if ! kafka-chaos elle fetch; then
  echo "setup.sh: warning: Elle is unavailable; cycle checks (G0, G1c) will not run" >&2
fi

# lazyfs (broker data that loses unsynced writes on power loss: --disk lazyfs),
# built once from its public source into the cache (harness/lazyfs_build.py;
# the source tarball is taken from ../shared/sources when there). Only power-loss
# runs need it, so a machine that cannot build it gets a warning.
if ! python3 -m kafka_chaos.harness.lazyfs_build >/dev/null; then
  echo "setup.sh: warning: lazyfs is unavailable; --disk lazyfs and power-loss will not run" >&2
fi

# Archive the JVM classes a check loads, once, so every later check's JVM
# starts faster (testkit/class_archive_build.py; kept per Spark version and JDK build,
# so a JDK update makes this build a new one).
python3 -m testkit.class_archive_build >/dev/null

if [ "$with_vagrant" -eq 1 ]; then
  # libvirtd is started here when no init system did it (containers, CI).
  python3 -c 'from harness.backends.libvirt_host import ensure_daemon; ensure_daemon()'
  vagrant/build-box.sh
fi

if [ "$with_tansu" -eq 1 ]; then
  if ! command -v cargo >/dev/null; then
    echo "setup.sh: --tansu needs cargo (Rust): see https://rustup.rs" >&2
    exit 1
  fi
  python3 -m kafka_chaos.harness.tansu_build  # prints the binary and the seconds its build took
fi
