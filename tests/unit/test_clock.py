"""Clock faults: params, schedules, and the node-side scripts run by a real shell.

Only the transport differs from production (``sh -c`` here, SSH there).  The
``system`` clock is exercised against a stand-in ``date`` on PATH, so no test
moves this machine's clock; the ``faketime`` clock against real libfaketime
where it is installed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kafka_chaos.harness import kafka_config as kc
from kafka_chaos.harness import kafka_db
from kafka_chaos.harness.backends import procs
from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.errors import CommandFailed, ConfigError
from kafka_chaos.harness.node import Node, RunResult, SSHTarget
from kafka_chaos.harness.spec import NemesisSpec
from kafka_chaos.nemeses import clock, registry
from kafka_chaos.nemeses import schedule as sch
from kafka_chaos.nemeses.base import FaultOp, NemesisError

NODES = ["n1", "n2", "n3"]
FAKE_DATE = """#!/usr/bin/env python3
# A stand-in for GNU date -s "now +S.mmm seconds": the clock is the epoch ms in
# $FAKE_CLOCK, each setting is logged.
import os, sys
path = os.environ["FAKE_CLOCK"]
words = sys.argv[2].split() if sys.argv[1:2] == ["-s"] else []
if len(words) == 3 and words[0] == "now" and words[2] == "seconds":
    s, ms = words[1].lstrip("+-").split(".")
    delta = (int(s) * 1000 + int(ms)) * (-1 if words[1][0] == "-" else 1)
    now = int(open(path).read())
    open(path, "w").write(str(now + delta))
    with open(path + ".log", "a") as log:
        log.write(words[1] + "\\n")
else:
    sys.exit(f"fake date: unexpected {sys.argv[1:]}")
"""
BASE_MS = 1_700_000_000_000
CLOCK_KINDS = ("clock-bump", "clock-strobe")


def clock_params(f: str, params: dict) -> dict:
    """A clock fault's params with its defaults filled in, as its kind validates them."""
    return registry.kind(f).params(params)


@dataclass
class ShellNode(Node):
    """A node whose commands run in a local shell instead of over SSH."""

    env: dict[str, str] = field(default_factory=dict)

    def run(
        self, command: str, timeout: float = 60, check: bool = True, idempotent: bool = True
    ) -> RunResult:
        p = subprocess.run(
            ["sh", "-c", command],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **self.env},
        )
        res = RunResult(p.returncode, p.stdout, p.stderr)
        if check and not res.ok:
            raise CommandFailed(f"{self.name}: exited {res.exit_code}: {res.stderr.strip()}")
        return res


def make_cluster(tmp_path: Path, backend: str) -> tuple[Cluster, ShellNode]:
    root = tmp_path / "nodes" / "n1"
    (root / "run").mkdir(parents=True)
    node = ShellNode("n1", 1, "127.0.0.1", SSHTarget("127.0.0.1"), str(root))
    if backend != "local":
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        (bin_dir / "date").write_text(FAKE_DATE)
        (bin_dir / "date").chmod(0o755)
        (tmp_path / "clock").write_text(str(BASE_MS))
        node.env = {
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "FAKE_CLOCK": str(tmp_path / "clock"),
        }
    return Cluster("unit", backend, [node], "4.4.0", "kraft"), node


@pytest.fixture
def no_settle(monkeypatch):
    monkeypatch.setattr(clock.FaketimeClock, "ready", lambda self, cluster, node: None)


def fake_ms(tmp_path: Path) -> int:
    return int((tmp_path / "clock").read_text())


def date_calls(tmp_path: Path) -> list[str]:
    log = tmp_path / "clock.log"
    return log.read_text().split() if log.exists() else []


def wait_until(check, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


# --- params and schedules -------------------------------------------------------------


@pytest.mark.parametrize(
    "ms, text", [(0, "+0"), (1500, "+1.500"), (-250, "-0.250"), (-60_000, "-60.000"), (7, "+0.007")]
)
def test_offsets_are_written_as_libfaketime_reads_them(ms, text):
    assert clock.offset_text(ms) == text


def test_clock_params_fill_defaults_and_keep_targeting_params():
    assert clock_params("clock-bump", {}) == {"delta_ms": 60_000}
    assert clock_params("clock-strobe", {"delta_ms": -5}) == {"delta_ms": -5, "period_ms": 2000}
    assert clock_params("clock-bump", {"topic": "t", "delta_ms": 3})["topic"] == "t"


@pytest.mark.parametrize(
    "f, params, message",
    [
        ("clock-bump", {"delta_ms": 0}, "delta_ms must be a non-zero integer"),
        ("clock-bump", {"delta_ms": 1.5}, "delta_ms must be"),
        ("clock-bump", {"delta_ms": True}, "delta_ms must be"),
        ("clock-bump", {"delta_ms": 86_400_001}, "delta_ms must be"),
        ("clock-bump", {"delta": 5}, r"has no param\(s\) \['delta'\]"),
        ("clock-bump", {"period_ms": 1000}, "has no param"),
        ("clock-strobe", {"period_ms": 999}, "period_ms must be an integer from 1000 to 60000"),
        ("clock-strobe", {"period_ms": "1s"}, "period_ms must be"),
    ],
)
def test_bad_clock_params_are_one_line_config_errors(f, params, message):
    op = {"id": 0, "f": f, "at_s": 1, "duration_s": 2, "targets": ["n1"], "params": params}
    with pytest.raises(ConfigError, match=message) as info:
        sch.Schedule.from_dict([op])
    assert "\n" not in str(info.value) and "ops[0]" in str(info.value)


def test_a_recorded_clock_fault_reads_back_with_every_param(tmp_path):
    ops = [{"id": 0, "f": "clock-strobe", "at_s": 1, "duration_s": 2, "targets": ["n2"]}]
    s = sch.for_spec(NemesisSpec(schedule=ops), NODES, 60, seed=1)
    assert s.ops[0].params == {"delta_ms": 10_000, "period_ms": 2000}
    s.save(tmp_path / "schedule.json")
    again = sch.replay_of(sch.Schedule.load(tmp_path / "schedule.json"), "x")
    assert again.plan() == s.plan()


def test_generated_clock_faults_carry_valid_params_and_replay():
    spec = NemesisSpec(faults=list(CLOCK_KINDS), interval_s=2, duration_s=3)
    s = sch.generate(spec, NODES, 300, seed=7)
    assert {op.f for op in s.ops} == set(CLOCK_KINDS)
    for op in s.ops:
        assert op.params == clock_params(op.f, op.params), "every param is explicit"
        assert len(op.targets) == 1
    deltas = [op.params["delta_ms"] for op in s.ops]
    assert min(deltas) < 0 < max(deltas), "clocks move both ways"
    back = sch.Schedule.from_dict(json.loads(json.dumps(s.to_dict())))
    assert back.plan() == s.plan()
    assert sch.generate(spec, NODES, 300, seed=7).plan() == s.plan()


def test_leader_targeted_clock_faults_resolve_later_but_fix_their_params():
    spec = NemesisSpec(faults=["clock-bump"], targets="leader", interval_s=1)
    for op in sch.generate(spec, NODES, 60, seed=3, topic="t").ops:
        assert op.targets == [] and op.target == "leader"
        assert "topic" not in op.params and "delta_ms" in op.params  # the run's own topic


# --- the node-side scripts --------------------------------------------------------------


def test_faketime_bump_and_reset_rewrite_the_offset_file(tmp_path, no_settle):
    cluster, node = make_cluster(tmp_path, "local")
    offset = Path(kc.faketime_file(node))
    assert not clock.reset(cluster, node), "nothing to undo on a fresh node"
    assert offset.read_text() == "+0\n"
    clock.bump(cluster, node, 1500)
    clock.bump(cluster, node, 1500)  # twice is harmless
    assert offset.read_text() == "+1.500\n"
    assert clock.reset(cluster, node)
    assert offset.read_text() == "+0\n"
    assert not clock.reset(cluster, node)


def test_system_bump_moves_the_clock_once_and_reset_undoes_exactly_it(tmp_path):
    cluster, node = make_cluster(tmp_path, "ssh")
    assert cluster.clock == "system"
    assert not clock.reset(cluster, node)
    assert date_calls(tmp_path) == [], "a node never faulted is not touched"
    clock.bump(cluster, node, 90_000)
    clock.bump(cluster, node, 90_000)
    assert fake_ms(tmp_path) == BASE_MS + 90_000
    assert len(date_calls(tmp_path)) == 1, "applying twice moves the clock once"
    clock.bump(cluster, node, -250)  # a new bump replaces the old offset
    assert fake_ms(tmp_path) == BASE_MS - 250
    assert clock.reset(cluster, node)
    assert not clock.reset(cluster, node)
    assert fake_ms(tmp_path) == BASE_MS
    assert Path(node.path("run", clock.OFFSET_RECORD)).read_text().strip() == "0"


def test_strobe_flips_the_clock_and_ends_by_itself_at_true_time(tmp_path):
    cluster, node = make_cluster(tmp_path, "vagrant")
    pid_file = Path(node.path("run", clock.STROBE_PID))
    clock.strobe(cluster, node, 2000, 1000, duration_s=2.5)
    assert pid_file.exists()
    wait_until(lambda: not pid_file.exists(), timeout_s=15)
    calls = date_calls(tmp_path)
    # on, off, on (t = 0, 1, 2 s), then the reset when the duration is up
    on, off = "+2.000", "-2.000"
    assert calls == [on, off, on, off], calls
    assert fake_ms(tmp_path) == BASE_MS
    assert Path(node.path("run", clock.OFFSET_RECORD)).read_text().strip() == "0"


def test_heal_stops_a_strobe_by_its_pid_and_resets(tmp_path, no_settle):
    cluster, node = make_cluster(tmp_path, "local")
    pid_file = Path(node.path("run", clock.STROBE_PID))
    clock.strobe(cluster, node, -3000, 1000, duration_s=600)
    clock.strobe(cluster, node, -3000, 1000, duration_s=600)  # replaces, never doubles
    pid = int(pid_file.read_text())
    wait_until(lambda: Path(kc.faketime_file(node)).read_text() == "-3.000\n")
    t0 = time.monotonic()
    assert clock.reset(cluster, node)
    assert time.monotonic() - t0 < 3, "SIGTERM ends the loop between steps, not after a period"
    assert not procs.alive(pid)
    assert not pid_file.exists()
    time.sleep(1.2)  # the loop is gone: nothing rewrites the offset any more
    assert Path(kc.faketime_file(node)).read_text() == "+0\n"
    assert not clock.reset(cluster, node)


def test_stopping_a_strobe_never_signals_a_process_that_is_not_its_loop(tmp_path, no_settle):
    cluster, node = make_cluster(tmp_path, "local")
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        Path(node.path("run", clock.STROBE_PID)).write_text(f"{other.pid}\n")
        clock.reset(cluster, node)
        time.sleep(0.2)
        assert other.poll() is None, "a process that is not our loop was signalled"
        assert not Path(node.path("run", clock.STROBE_PID)).exists()
    finally:
        other.kill()
        other.wait()


def test_unknown_clock_mechanism_is_refused(tmp_path, monkeypatch):
    cluster, _ = make_cluster(tmp_path, "local")
    monkeypatch.setattr(Cluster, "clock", property(lambda self: "sundial"))
    with pytest.raises(NemesisError, match="unknown clock mechanism 'sundial'"):
        clock.mechanism(cluster)


def test_clock_faults_through_the_runner_entry_points(tmp_path, no_settle):
    from kafka_chaos.nemeses.runner import apply, heal

    cluster, node = make_cluster(tmp_path, "local")
    op = FaultOp(0, "clock-bump", 0.0, 1.0, ["n1"], params={"delta_ms": -2000})
    apply(cluster, op)
    apply(cluster, op)
    assert Path(kc.faketime_file(node)).read_text() == "-2.000\n"
    heal(cluster, op)
    heal(cluster, op)
    assert Path(kc.faketime_file(node)).read_text() == "+0\n"


# --- the launcher and libfaketime ---------------------------------------------------------

needs_faketime = pytest.mark.skipif(
    not Path(kc.FAKETIME_LIB).exists(), reason="libfaketime is not installed"
)


def launch(tmp_path: Path, command: str, faketime: str | None) -> subprocess.CompletedProcess:
    script = tmp_path / "start.sh"
    script.write_text(kc.launcher_script(str(tmp_path / "x.pid"), command, faketime))
    return subprocess.run(["sh", str(script)], capture_output=True, text=True, timeout=30)


def test_the_launcher_starts_true_and_keeps_an_offset_a_fault_wrote(tmp_path):
    offset = tmp_path / "faketime"
    launch(tmp_path, "true", str(offset))
    assert offset.read_text() == "+0\n"
    offset.write_text("+5.000\n")
    launch(tmp_path, "true", str(offset))
    assert offset.read_text() == "+5.000\n", "a broker restarted mid-fault stays on its clock"
    assert (tmp_path / "x.pid").read_text().strip().isdigit()


@needs_faketime
def test_a_process_started_by_the_launcher_sees_the_offset_but_true_monotonic_time(tmp_path):
    offset = tmp_path / "faketime"
    offset.write_text("+3600.000\n")
    probe = f"{sys.executable} -c 'import time; print(time.time(), time.monotonic())'"
    before_wall, before_mono = time.time(), time.monotonic()
    out = launch(tmp_path, probe, str(offset))
    wall, mono = map(float, out.stdout.split())
    assert 3599 < wall - before_wall < 3610
    assert 0 <= mono - before_mono < 10, "monotonic time is never faked"


@needs_faketime
def test_unfaked_services_tells_a_faked_jvm_from_one_on_the_real_clock(tmp_path):
    cluster, node = make_cluster(tmp_path, "local")
    tag = f"-Dkafka.chaos.root={node.root_dir}"
    cmd = f"{sys.executable} -c 'import time; time.sleep(60)' {tag}"
    for faketime, expected in ((kc.faketime_file(node), []), (None, ["kafka"])):
        script = Path(node.path("run", "start.sh"))
        script.write_text(kc.launcher_script(kafka_db.KAFKA.pid_file(node), cmd, faketime))
        proc = subprocess.Popen(["sh", str(script)])
        try:
            wait_until(lambda: Path(kafka_db.KAFKA.pid_file(node)).exists())
            time.sleep(0.3)  # the exec into python has happened
            assert kafka_db.unfaked_services(cluster, node) == expected
        finally:
            proc.kill()
            proc.wait()
            Path(kafka_db.KAFKA.pid_file(node)).unlink()
    assert kafka_db.unfaked_services(cluster, node) == [], "a stopped JVM reads it when started"


JAVA_PROBE = """
public class Probe {
    public static void main(String[] args) {
        long wall = System.currentTimeMillis();
        long end = System.nanoTime() + 1_000_000_000L;
        int parks = 0;
        while (System.nanoTime() < end) {
            java.util.concurrent.locks.LockSupport.parkNanos(50_000_000L);
            parks++;
        }
        System.out.println(wall + " " + parks);
    }
}
"""


@needs_faketime
@pytest.mark.skipif(shutil.which("java") is None, reason="no java")
def test_a_jvm_under_the_launcher_sees_the_offset_and_its_timed_waits_still_wait(tmp_path):
    # libfaketime's own default on glibc makes every timed park return at once:
    # the JVM's threads spin and a KRaft quorum never forms
    (tmp_path / "Probe.java").write_text(JAVA_PROBE)
    offset = tmp_path / "faketime"
    offset.write_text("+3600.000\n")
    before = time.time()
    out = launch(tmp_path, f"java -XX:+UseSerialGC {tmp_path / 'Probe.java'}", str(offset))
    wall_ms, parks = map(int, out.stdout.split())
    assert 3599 < wall_ms / 1000 - before < 3660, out.stderr
    assert parks <= 25, f"{parks} timed parks of 50 ms in one second: timed waits do not wait"
