"""Real Elle (no mocks) on hand-made Kafka dependency graphs.

Every test shares the process's one Elle JVM (JPype cannot start a second).
The module is skipped only when Elle's classpath cannot be resolved; CI
resolves it from the Clojars mirror that test.sh names in KC_EXTRA_MAVEN_REPOS
(and a skip in CI fails anyway, tests/conftest.py).
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import time
from typing import Any

import pytest
from kafka_chaos.harness import elle_classpath
from kafka_chaos.harness.errors import ElleResolveError

try:
    elle_classpath.classpath()
except ElleResolveError as e:
    pytest.skip(f"Elle's classpath cannot be resolved: {e}", allow_module_level=True)

from kafka_chaos.checkers.txn import elle, elle_jvm  # noqa: E402  (only once Elle is known to resolve)


@pytest.fixture(scope="session")
def find_cycles():
    """elle.find_cycles, with the JVM started once for the whole session."""
    elle_jvm.clojure()
    return elle.find_cycles


def op(index: int, invoke_index: int, process: int, type: str = "ok") -> dict[str, Any]:
    """A transaction completed at ``index`` and invoked at ``invoke_index`` (1 us per line)."""
    return {
        "index": index,
        "invoke_index": invoke_index,
        "time": index * 1000,
        "invoke_time": invoke_index * 1000,
        "process": process,
        "type": type,
    }


def ww(value: int, topic: str, partition: int, offset: int) -> dict[str, Any]:
    """T1 sent value at offset; T2 sent value + 1 right after it."""
    return {
        "value": value,
        "topic": topic,
        "partition": partition,
        "offset": offset,
        "next_value": value + 1,
        "next_offset": offset + 1,
    }


def rotated(indices: list[int]) -> list[int]:
    """A cycle's indices starting at its smallest (Elle may start anywhere)."""
    i = indices.index(min(indices))
    return indices[i:] + indices[:i]


def only(result: dict[str, Any], name: str) -> dict[str, Any]:
    """The single cycle of anomaly ``name``, asserting nothing else was found."""
    assert set(result) == {name}, result
    assert len(result[name]) == 1
    return result[name][0]


def steps_by_kind(cycle: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["kind"]: s for s in cycle["steps"]}


def test_g0_two_partitions_written_in_opposite_orders(find_cycles) -> None:
    # T1 (process 0) and T2 (process 1) run concurrently; T1's send precedes
    # T2's in t/0, T2's precedes T1's in t/1.
    ops = [op(2, 0, 0), op(3, 1, 1)]
    edges = [(2, 3, "ww", ww(10, "t", 0, 17)), (3, 2, "ww", ww(20, "t", 1, 4))]
    cycle = only(find_cycles(ops, edges), "G0")
    assert rotated(cycle["indices"]) == [2, 3]
    assert [s["kind"] for s in cycle["steps"]] == ["ww", "ww"]
    by_edge = {(s["from"], s["to"]): s for s in cycle["steps"]}
    # Elle names the transactions T1, T2 in the order the cycle starts at.
    assert re.fullmatch(
        r"T\d sent 10 to t/0 at offset 17, directly before T\d's 11 at offset 18",
        by_edge[(2, 3)]["text"],
    )
    assert re.fullmatch(
        r"T\d sent 20 to t/1 at offset 4, directly before T\d's 21 at offset 5",
        by_edge[(3, 2)]["text"],
    )
    assert by_edge[(2, 3)]["data"] == ww(10, "t", 0, 17)
    assert "a contradiction" in cycle["text"] and ":index 2" in cycle["text"]


def test_g1c_ww_one_way_wr_the_other(find_cycles) -> None:
    ops = [op(2, 0, 0), op(3, 1, 1)]
    edges = [
        (2, 3, "ww", ww(42, "t", 3, 17)),
        {
            "from": 3,
            "to": 2,
            "kind": "wr",
            "data": {"value": 7, "topic": "u", "partition": 0, "offset": 9},
        },
    ]
    cycle = only(find_cycles(ops, edges), "G1c")
    assert rotated(cycle["indices"]) == [2, 3]
    steps = steps_by_kind(cycle)
    assert (steps["ww"]["from"], steps["ww"]["to"]) == (2, 3)
    assert (steps["wr"]["from"], steps["wr"]["to"]) == (3, 2)
    # Named by their place in the cycle: whoever polled is the wr edge's target.
    assert "sent 42 to t/3 at offset 17, directly before" in steps["ww"]["text"]
    assert "'s 43 at offset 18" in steps["ww"]["text"]
    assert " polled 7 from u/0 at offset 9, which " in steps["wr"]["text"]
    assert steps["wr"]["text"].endswith(" sent")


def test_g1c_process_needs_the_process_order(find_cycles) -> None:
    # Process 0 ran T1 (lines 0-1) and then T2 (lines 2-3), yet T1 polled
    # T2's value: a cycle only with process order.
    ops = [op(1, 0, 0), op(3, 2, 0)]
    edges = [(3, 1, "wr", {"value": 5, "topic": "t", "partition": 0, "offset": 2})]
    cycle = only(find_cycles(ops, edges), "G1c-process")
    assert rotated(cycle["indices"]) == [1, 3]
    steps = steps_by_kind(cycle)
    assert (steps["process"]["from"], steps["process"]["to"]) == (1, 3)
    assert steps["process"]["data"] == {"process": 0}
    assert "process 0 executed" in steps["process"]["text"]
    assert "polled 5 from t/0 at offset 2" in steps["wr"]["text"]


def test_g1c_realtime_needs_the_realtime_order(find_cycles) -> None:
    # Different processes: T1 completed (line 1) before T2 was invoked (line 2),
    # yet T1 polled T2's value.
    ops = [op(1, 0, 0), op(3, 2, 1)]
    edges = [(3, 1, "wr", {"value": 5, "topic": "t", "partition": 0, "offset": 2})]
    cycle = only(find_cycles(ops, edges), "G1c-realtime")
    assert rotated(cycle["indices"]) == [1, 3]
    steps = steps_by_kind(cycle)
    assert steps["realtime"]["data"] == {"completed_index": 1, "invoke_index": 2}
    assert "completed at index 1" in steps["realtime"]["text"]
    assert "at index 2" in steps["realtime"]["text"]
    assert "polled 5 from t/0 at offset 2" in steps["wr"]["text"]


def test_g0_realtime_and_an_info_transaction(find_cycles) -> None:
    # An info transaction (outcome unknown) still takes part in cycles.
    ops = [op(1, 0, 0), op(3, 2, 1, type="info")]
    edges = [(3, 1, "ww", ww(8, "t", 2, 0))]
    cycle = only(find_cycles(ops, edges), "G0-realtime")
    assert sorted(s["kind"] for s in cycle["steps"]) == ["realtime", "ww"]
    assert ":type :info" in cycle["text"]


def test_many_transactions_without_a_cycle(find_cycles, record_property) -> None:
    # 400 transactions, 8 processes, each overlapping the next seven; every
    # data edge points forward in invoke order, so nothing can close a cycle.
    rng = random.Random(17)
    n = 400
    ops = [op(2 * k + 15, 2 * k, k % 8) for k in range(n)]
    edges = []
    for a in range(n - 1):
        later = range(a + 1, min(n, a + 31))
        for b in rng.sample(later, min(3, len(later))):
            kind = rng.choice(["ww", "wr"])
            edges.append((ops[a]["index"], ops[b]["index"], kind, {"value": a}))
    assert len(edges) > 1000
    t0 = time.perf_counter()
    assert find_cycles(ops, edges) == {}
    record_property(
        "logged",
        f"Elle: {n} transactions, {len(edges)} edges, no cycle, {time.perf_counter() - t0:.2f} s",
    )


def test_jvm_started_once_and_elle_compiled_into_the_cache(find_cycles, record_property) -> None:
    assert elle_jvm.clojure() is elle_jvm.clojure()
    aot = elle_jvm.aot_dir(elle_classpath.classpath())
    assert (aot / elle_jvm.AOT_MARKER).is_file()
    assert list(aot.glob("elle/txn*.class"))
    t = elle_jvm.clojure().times
    loads = sum(t.loads.values())
    record_property(
        "logged",
        f"Elle start: JVM {t.jvm_s:.2f} s, Clojure {t.clojure_s:.2f} s, "
        f"require {t.require_s:.2f} s{' (compiling)' if t.compiled else ''}, "
        f"elle_cycles.clj {loads:.2f} s",
    )


def test_no_edges_needs_no_jvm_work(find_cycles) -> None:
    assert find_cycles([op(1, 0, 0), op(3, 2, 1)], []) == {}
    # A transaction polling its own send is no dependency.
    assert find_cycles([op(1, 0, 0)], [(1, 1, "wr", {"value": 1})]) == {}


def test_strings_cross_to_clojure_intact(find_cycles) -> None:
    topic = 'to"p\\ic\n\u00e9\u4e2d'
    ops = [{**op(2, 0, 0), "value": {"note": topic, "ops": [1, None, True, 2.5]}}, op(3, 1, 1)]
    edges = [(2, 3, "ww", ww(1, topic, 0, 0)), (3, 2, "ww", ww(5, topic, 1, 0))]
    cycle = only(find_cycles(ops, edges), "G0")
    assert {s["data"]["topic"] for s in cycle["steps"]} == {topic}
    assert f"to {topic}/0 at offset 0" in " ".join(s["text"] for s in cycle["steps"])


@pytest.mark.parametrize(
    ("ops", "edges", "message"),
    [
        ([op(1, 0, 0)], [(1, 9, "ww", {})], "no op has completion index 9"),
        ([op(1, 0, 0), op(3, 2, 1)], [(1, 3, "rw", {})], "kind must be one of"),
        ([op(3, 0, 0), op(4, 1, 0)], [(3, 4, "ww", {})], "two transactions in flight"),
        ([op(1, 0, 0), op(2, 1, 1)], [(1, 2, "ww", {})], "index 1 is used twice"),
        ([op(1, 2, 0)], [], "must precede it"),
        ([{**op(1, 0, 0), "process": "nemesis"}], [], "process must be an int"),
        ([{**op(1, 0, 0), "type": "fail"}], [], "type must be one of"),
    ],
)
def test_malformed_input_is_a_value_error(ops, edges, message) -> None:
    with pytest.raises(ValueError, match=message):
        elle.find_cycles(ops, edges)


def test_edn_encoding() -> None:
    assert elle.to_edn({"a_b": [1, -2, 2.5, None, True, False], "x y": 'q"'}) == (
        '{:a_b [1 -2 2.5 nil true false], "x y" "q\\""}'
    )
    with pytest.raises(ValueError):
        elle.to_edn(float("nan"))
    with pytest.raises(ValueError):
        elle.to_edn({1: 2})


CHILD_TEST = '''
import atexit

import jpype  # noqa: F401  (JPype's exit handler is registered first, as in any process)

from kafka_chaos.checkers.txn import elle_jvm

# A hot loop whose null checks HotSpot compiles into faulting loads: it survives
# only while the JVM's SIGSEGV handler is installed.
NPE_LOOP = """
(loop [i 0 caught 0]
  (if (< i 3000000)
    (recur (inc i) (+ caught (try (.length ^String (if (even? i) nil "x"))
                                  (catch NullPointerException _ 1))))
    caught))
"""


def hot_null_checks():
    e = elle_jvm.clojure()
    caught = e.var("clojure.core", "eval").invoke(
        e.var("clojure.core", "read-string").invoke(NPE_LOOP))
    print("caught", caught, flush=True)


def test_java_runs_at_exit():
    atexit.register(hot_null_checks)  # runs after pytest's faulthandler removed the JVM's handlers
    hot_null_checks()
'''


def test_java_at_exit_survives_pytests_faulthandler(tmp_path) -> None:
    """pytest's faulthandler drops the JVM's SIGSEGV handler at session end; Java
    code that runs at exit (JPype's shutdown) then crashed the process with
    exit 139 after every test passed (CI, 2026-11-24).  Elle's exit handler puts
    the JVM's handlers back first (checkers/txn/jvm_signals.py)."""
    (tmp_path / "test_child.py").write_text(CHILD_TEST)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-s", "test_child.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    assert done.stdout.count("caught 3000000") == 2, done.stdout[-2000:]
