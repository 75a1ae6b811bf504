"""One probe of a stalled share-partition: the Admin API's view and a fresh Java member's.

Why a child process: JPype gives a process one JVM with a fixed classpath
(workloads/java/jvm.py), and a librdkafka run's harness has none, nor should
it get one mid-run.  So the probe is ``python -m kafka_chaos.workloads.java.share_probe``,
a process of its own started per probe, whatever the workload's client, and
killed if it overruns ``PROBE_TIMEOUT_S``.

What it does, each call bounded:

1. Admin: ``describeShareGroups`` (members, their assignments, the group's
   epochs and coordinator), ``listShareGroupOffsets`` (each partition's share
   start offset, leader epoch and lag) and ``describeTopics`` (each partition's
   leader and ISR), before the probe member joins, so the group is as the
   stall left it.
2. A ``KafkaShareConsumer`` (Kafka's own, of the cluster's version) joins the
   same group and polls until it is given records or ``POLL_WINDOW_S`` ends,
   and RELEASEs that one batch, so the records go back to the workload (each
   delivery still counts towards the record's delivery limit, as any member's
   would: one batch adds at most one).
3. ``describeShareGroups`` again, now with the probe member's assignment (was
   it given the stalled partition?), then it closes.

Its deliveries and releases are the history's: the child reports each step on
stdout, and the parent writes it as a line of the probe's own process number
(share-subscribe, share-poll, share-ack of type release, share-close), exactly
as a workload member's.  The share checks then see every delivery the broker
made, so the probe cannot make them wrong; a record the probe was given
counts as a delivery of a member that released it.  To keep each line's time
honest the child waits, after announcing a call, until the parent has written
its invoke line ("go" on stdin): the call starts after its invoke line and
its completion line is written after it returns.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from kafka_chaos.harness.history import HistoryWriter

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 60.0  # a waiting child's probe: Admin, join, poll window, commit, close
POLL_WINDOW_S = 15.0  # a new member's first assignment: 8 s and more on a loaded machine
ADMIN_TIMEOUT_S = 8.0  # a loaded machine's broker answers a describe in seconds
CALL_TIMEOUT_S = 5.0
MARK = "@@ "  # the child's protocol lines on stdout (anything else there is ignored)


# -- parent side ---------------------------------------------------------------


class ProbeProcess:
    """A probe child started ahead of need: its JVM is up (seconds on two loaded cores)
    before a stall is seen, so a probe costs only its Kafka calls.  One probe per
    child; ``run`` starts the next one after it."""

    def __init__(
        self,
        kafka_version: str,
        log_dir: Path,
        bootstrap: str,
        debug: dict[str, Any] | None = None,
        member: tuple[str, list[str]] | None = None,
    ) -> None:
        self.kafka_version = kafka_version
        self.log_dir = Path(log_dir)
        self.bootstrap = bootstrap
        self.debug = debug  # the run's ``debug`` (harness.spec.DebugSpec) as a dict, or None
        # (group, client ids): the next probe's member is built ahead for this group
        # (constructing a KafkaShareConsumer takes seconds on a loaded machine)
        self.member = member
        self.started = 0
        self.child: subprocess.Popen[str] | None = None

    def start(self) -> None:
        """Start a child (its JVM comes up while the run goes on)."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        root = Path(__file__).resolve().parents[2]
        with open(self.log_dir / "probe-stderr.log", "a") as err:  # kept, never a full pipe
            self.child = subprocess.Popen(
                [sys.executable, "-m", "kafka_chaos.workloads.java.share_probe",
                 self.kafka_version, str(self.log_dir), self.bootstrap,
                 json.dumps({"debug": self.debug, **self._next_member()})],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
                cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
            )  # fmt: skip

    def _next_member(self) -> dict[str, Any]:
        """The group and client id the next child builds its member for, if known."""
        if self.member is None:
            return {}
        group, client_ids = self.member
        n, self.started = self.started, self.started + 1
        return {"group": group, "client_id": client_ids[min(n, len(client_ids) - 1)]}

    def stop(self) -> None:
        if self.child is not None and self.child.poll() is None:
            self.child.kill()
            self.child.wait(5)
        self.child = None

    def run(
        self,
        history: HistoryWriter,
        process: int,
        settings: dict[str, Any],
        timeout_s: float = PROBE_TIMEOUT_S,
        again: bool = True,
    ) -> dict[str, Any]:
        """One probe by the waiting child, then (``again``) a fresh child for the next."""
        if self.child is None:
            self.start()
        child, self.child = self.child, None
        assert child is not None
        try:
            return _drive(child, history, process, settings, timeout_s)
        finally:
            if again:
                self.start()


def _drive(
    child: subprocess.Popen[str],
    history: HistoryWriter,
    process: int,
    settings: dict[str, Any],
    timeout_s: float,
) -> dict[str, Any]:
    """Send ``settings`` to a waiting child; write its member's steps to ``history`` as
    ``process``; return what it saw: ``admin`` (before it joined), ``admin_joined``,
    ``member`` (its polls), ``error``, ``duration_s`` (killed past ``timeout_s``)."""
    started = time.monotonic()
    group = settings["group"]
    out: dict[str, Any] = {"process": process, "admin": None, "member": [], "error": None}
    killer = threading.Timer(timeout_s, child.kill)
    killer.start()
    open_call: str | None = None
    try:
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write(json.dumps(settings) + "\n")
        child.stdin.flush()
        for line in child.stdout:
            if not line.startswith(MARK):
                continue
            ev = json.loads(line[len(MARK) :])
            kind = ev.pop("event")
            if kind == "invoke":
                open_call = ev["f"]
                history.append(process, "invoke", ev["f"], {"group": group, **ev["value"]})
                child.stdin.write("go\n")
                child.stdin.flush()
            elif kind in ("ok", "fail", "info"):
                history.append(process, kind, ev["f"], {"group": group, **ev["value"]})
                open_call = None
                if ev["f"] == "share-poll" and kind == "ok":
                    out["member"].append(
                        {"at_s": round(history.elapsed_ns() / 1e9, 3), "records": [
                            {k: r[k] for k in ("partition", "offset", "delivery_count")}
                            for r in ev["value"]["records"]
                        ]}
                    )  # fmt: skip
            elif kind in ("admin", "admin_joined"):  # when it answered, on the history's axis
                out[kind] = {"at_s": round(history.elapsed_ns() / 1e9, 3), **ev}
            elif kind == "error":
                out["error"] = ev["error"]
            elif kind == "lock_ms":
                out["acquisition_lock_ms"] = ev["value"]
        child.wait(max(0.1, timeout_s - (time.monotonic() - started)))
    except (OSError, ValueError, subprocess.TimeoutExpired) as e:
        out["error"] = out["error"] or f"{type(e).__name__}: {e}"
    finally:
        killer.cancel()
        if child.poll() is None:
            child.kill()
            child.wait(5)
        if child.returncode not in (0, None) and out["error"] is None:
            out["error"] = f"probe process ended with {child.returncode} (probe-stderr.log)"
        if open_call is not None:  # killed inside a call: its outcome is unknown
            history.append(process, "info", open_call, {"group": group, "error": "probe killed"})
    out["duration_s"] = round(time.monotonic() - started, 2)
    return out


# -- child side ----------------------------------------------------------------


def _say(event: str, **fields: Any) -> None:
    print(MARK + json.dumps({"event": event, **fields}), flush=True)


def _call(f: str, value: Any) -> None:
    """Announce a call and wait until the parent has written its invoke line."""
    _say("invoke", f=f, value=value)
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("parent gone")


def _new_admin(s: dict[str, Any]) -> Any:
    import jpype
    from kafka_chaos.workloads.java.interop import properties

    ms = str(int(ADMIN_TIMEOUT_S * 1000))
    settings = {"bootstrap.servers": s["bootstrap"], "request.timeout.ms": ms,
                "default.api.timeout.ms": ms}  # fmt: skip
    return jpype.JClass("org.apache.kafka.clients.admin.Admin").create(properties(settings))


def _bounded(view: dict[str, Any], name: str, part: Any) -> None:
    """One part of the Admin view: its answer, or why there is none (the rest still run)."""
    try:
        view[name] = part()
    except Exception as e:  # noqa: BLE001 - recorded; a stalled broker may not answer
        view[f"{name}_error"] = f"{type(e).__name__}: {e}"


def _admin_view(admin: Any, s: dict[str, Any], parts: tuple[str, ...]) -> dict[str, Any]:
    """``group`` (describeShareGroups), ``offsets`` (listShareGroupOffsets) and
    ``leaders`` (describeTopics), as asked, each bounded by ADMIN_TIMEOUT_S."""
    import jpype
    from kafka_chaos.workloads.java.interop import string_list, topic_partition

    unit = jpype.JClass("java.util.concurrent.TimeUnit").MILLISECONDS
    ms = int(ADMIN_TIMEOUT_S * 1000)

    def group() -> dict[str, Any]:
        g = admin.describeShareGroups(string_list([s["group"]])).all().get(ms, unit)
        g = g.get(s["group"])
        members = [
            {"member_id": str(m.consumerId()), "client_id": str(m.clientId()),
             "host": str(m.host()), "member_epoch": int(m.memberEpoch()),
             "partitions": sorted(int(tp.partition()) for tp in m.assignment().topicPartitions()
                                  if str(tp.topic()) == s["topic"])}
            for m in g.members()
        ]  # fmt: skip
        return {
            "state": str(g.groupState()),
            "group_epoch": int(g.groupEpoch()),
            "target_assignment_epoch": int(g.targetAssignmentEpoch()),
            "coordinator": int(g.coordinator().id()) if g.coordinator() is not None else None,
            "members": sorted(members, key=lambda m: m["client_id"]),
        }

    def offsets() -> dict[int, Any]:
        tps = jpype.JClass("java.util.ArrayList")()
        for p in range(s["partitions"]):
            tps.add(topic_partition(s["topic"], p))
        spec = jpype.JClass("org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec")()
        specs = jpype.JClass("java.util.HashMap")()
        specs.put(s["group"], spec.topicPartitions(tps))
        got = admin.listShareGroupOffsets(specs).partitionsToOffsetInfo(s["group"]).get(ms, unit)
        return {
            int(tp.partition()): None if info is None else {
                "start_offset": int(info.startOffset()),
                "leader_epoch": int(info.leaderEpoch().get())
                if info.leaderEpoch().isPresent() else None,
                "lag": int(info.lag().get()) if info.lag().isPresent() else None,
            }
            for tp, info in got.items()
        }  # fmt: skip

    def leaders() -> dict[int, Any]:
        topics = admin.describeTopics(string_list([s["topic"]])).allTopicNames()
        return {
            int(pi.partition()): {
                "leader": int(pi.leader().id()) if pi.leader() is not None else None,
                "isr": sorted(int(n.id()) for n in pi.isr()),
            }
            for pi in topics.get(ms, unit).get(s["topic"]).partitions()
        }

    view: dict[str, Any] = {}
    threads = [  # at once: a broker that does not answer costs one bound, not three
        threading.Thread(target=_bounded, args=(view, name, part), daemon=True)
        for name, part in (("group", group), ("offsets", offsets), ("leaders", leaders))
        if name in parts
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(ADMIN_TIMEOUT_S + 2)
    return dict(view)


def _new_consumer(bootstrap: str, group: str, client_id: str) -> Any:
    import jpype
    from kafka_chaos.workloads.java.interop import CONSUMER, properties
    from kafka_chaos.workloads.java.share_consumer import java_share_properties

    settings = java_share_properties(bootstrap, group, client_id)
    return jpype.JClass(CONSUMER + "KafkaShareConsumer")(properties(settings))


def _member(s: dict[str, Any], admin: Any, consumer: Any) -> None:
    """Join, poll until the first records (or the window's end), release them all, commit,
    ask the group again (now with this member's assignment), close; every step announced.

    Why one batch only: a released record is available at once, and the next poll
    would acquire it again, raising its delivery count each time until the limit
    archives it (a first version of this probe did exactly that).  One batch adds
    at most one delivery to any record.
    """
    import jpype
    from kafka_chaos.workloads.java.consumer import records_of
    from kafka_chaos.workloads.java.errors import judge
    from kafka_chaos.workloads.java.interop import CONSUMER, duration, string_list

    release = jpype.JClass(CONSUMER + "AcknowledgeType").RELEASE
    sub = {"topics": [s["topic"]], "lock_ms": s["lock_ms"],
           "delivery_limit": s["delivery_limit"], "probe": True}  # fmt: skip
    try:
        _call("share-subscribe", sub)
        consumer.subscribe(string_list([s["topic"]]))
        _say("ok", f="share-subscribe", value=sub)
        deadline = time.monotonic() + s.get("poll_window_s", POLL_WINDOW_S)
        records: list[dict[str, Any]] = []
        while not records and time.monotonic() < deadline:
            _call("share-poll", {"probe": True})
            try:
                polled = jpype.JClass("kafkachaos.Polled")(consumer.poll(duration(1.0)))
            except jpype.JException as e:
                _say("info", f="share-poll", value={"error": judge(e).name, "probe": True})
                return
            records = records_of(polled)
            for i, r in enumerate(records):
                count = polled.records.get(i).deliveryCount()
                r["delivery_count"] = int(count.get()) if count.isPresent() else None
            _say("ok", f="share-poll", value={"records": records, "probe": True})
        if records:
            for i in range(len(records)):
                consumer.acknowledge(polled.records.get(i), release)
            acks = [{k: r[k] for k in ("topic", "partition", "offset", "value")}
                    | {"type": "release"} for r in records]  # fmt: skip
            _call("share-ack", {"acks": acks, "probe": True})
            try:
                result = consumer.commitSync(duration(CALL_TIMEOUT_S))
                failed = [
                    {"topic": str(tp.topic()), "partition": int(tp.partition()),
                     "error": judge(exc.get()).name}
                    for tp, exc in result.items() if exc.isPresent()
                ]  # fmt: skip
                _say("ok", f="share-ack", value={"acks": acks, "failed": failed, "probe": True})
            except jpype.JException as e:
                _say("info", f="share-ack", value={"acks": acks, "error": judge(e).name})
        lock = consumer.acquisitionLockTimeoutMs()
        _say("lock_ms", value=int(lock.get()) if lock.isPresent() else None)
        _say("admin_joined", **_admin_view(admin, s, ("group",)))
    finally:
        consumer.close(duration(CALL_TIMEOUT_S))
        _say("ok", f="share-close", value={"probe": True})


def main() -> None:
    """``python -m kafka_chaos.workloads.java.share_probe KAFKA_VERSION LOG_DIR BOOTSTRAP
    [DEBUG]``: start the
    JVM and the Admin client and load the share consumer's classes (seconds each on two
    loaded cores), say ``ready``, then wait on stdin for one probe's settings (EOF: the
    parent is gone)."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    from kafka_chaos.harness.spec import DebugSpec
    from kafka_chaos.workloads.java import jvm

    version, log_dir, bootstrap = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    ahead = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
    debug = ahead.get("debug")
    log_dir.mkdir(parents=True, exist_ok=True)
    try:  # with --client-debug the probe member's share internals log at DEBUG too
        jvm.start(version, log_dir, DebugSpec(**debug) if debug and debug.get("client") else None)
        import jpype
        from kafka_chaos.workloads.java.interop import CONSUMER

        admin = _new_admin({"bootstrap": bootstrap})
        jpype.JClass(CONSUMER + "AcknowledgeType")
        built = None
        if ahead.get("group"):
            built = _new_consumer(bootstrap, ahead["group"], ahead["client_id"])
        try:
            _say("ready")
            line = sys.stdin.readline()
            if not line:
                return
            s = {"bootstrap": bootstrap, **json.loads(line)}
            _say("admin", **_admin_view(admin, s, ("group", "offsets", "leaders")))
            if built is None or (ahead["group"], ahead["client_id"]) != (
                s["group"],
                s["client_id"],
            ):
                if built is not None:
                    built.close()
                built = _new_consumer(bootstrap, s["group"], s["client_id"])
            _member(s, admin, built)
        finally:
            admin.close(jpype.JClass("java.time.Duration").ofMillis(int(ADMIN_TIMEOUT_S * 1000)))
    except SystemExit:
        raise
    except Exception as e:  # noqa: BLE001 - reported to the parent, which records it
        _say("error", error=f"{type(e).__name__}: {e}")


if __name__ == "__main__":
    main()
