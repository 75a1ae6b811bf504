#!/usr/bin/env bash
# Runs every test: unit, property, integration (real local Kafka clusters)
# and browser tests. pytest's "no tests collected" (exit 5) counts as failure.
#
# ./test.sh --fast runs the unit tier only (no cluster, no browser), its
# property tests on fewer generated histories (tests/conftest.py), and
# leaves out the unit tests marked slow (whole end-to-end checks of one
# history, which the same checks' property tests cover in one Spark job):
# minutes, not the better part of an hour.
# ./test.sh --vagrant runs the tests on real VMs instead (tests/vagrant):
# it installs Vagrant, libvirt and QEMU and builds the box first.
# ./test.sh --tansu runs the tests of the second broker, Tansu (tests/tansu):
# it installs PostgreSQL and builds Tansu first (docs/brokers.md).
set -uo pipefail
cd "$(dirname "$0")"
suite=(tests --ignore=tests/vagrant --ignore=tests/tansu)
setup_args=()
case "${1:-}" in
  --fast)
    shift
    suite=(tests/unit -m "not slow")
    export KC_TEST_TIER=fast
    ;;
  --vagrant)
    shift
    suite=(tests/vagrant)
    setup_args=(--vagrant)
    ;;
  --tansu)
    shift
    suite=(tests/tansu)
    setup_args=(--tansu)
    ;;
esac
# A Maven mirror of Clojars beside the repository (machines that cannot reach
# Clojars have one): Elle is resolved from it (harness/elle_classpath.py).
if [ -d ../shared/maven ]; then
  mirror="file://$(cd ../shared/maven && pwd)"
  case " ${KC_EXTRA_MAVEN_REPOS:-} " in
    *" $mirror "*) ;;
    *) export KC_EXTRA_MAVEN_REPOS="${KC_EXTRA_MAVEN_REPOS:+$KC_EXTRA_MAVEN_REPOS }$mirror" ;;
  esac
fi
./setup.sh "${setup_args[@]}" || exit 1
ruff check . || exit 1
# --durations: every run, CI included, shows where its time went.
# -n: pytest-xdist workers, one per core: the cluster tests all run in one of
# them, in order, and the unit modules beside them.  The cluster tests run
# as two units on two clusters, with a third worker (tests/_xdist_order.py
# says why); KC_TEST_CLUSTER_UNITS=1 keeps them in one.
workers=2
[ "${KC_TEST_CLUSTER_UNITS:-2}" = 2 ] && [ "${KC_TEST_TIER:-}" != fast ] && workers=3
python3 -m pytest -p no:cacheprovider -n "${KC_TEST_WORKERS:-$workers}" --timeout=900 \
  --durations=30 "$@" "${suite[@]}"
rc=$?
# Never leave a cluster behind, whatever happened: this removes EVERY
# kafka-chaos cluster on the machine, not only the tests' own.  The fast
# tier starts none, so it leaves the machine's clusters alone.
if [ "${KC_TEST_TIER:-}" != fast ]; then
  kafka-chaos cluster down --all >/dev/null 2>&1 || true
fi
if [ "$rc" -eq 5 ]; then
  echo "test.sh: pytest collected no tests" >&2
  exit 1
fi
exit "$rc"
