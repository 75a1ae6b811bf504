"""Valid transactional histories, from a small model of Kafka's transactions.

For the property tests (every generated history must be judged valid, and
anomalies are injected into them) and for the checker benchmarks.  The
histories are what ``workloads.txn_client`` records (docs/history.md,
``txn`` and ``seek``), run by a model faithful where the checks look:

* **The log.** Each partition is a list of entries.  A transaction's sends
  take offsets as they happen, interleaved with other transactions; when
  it ends, a commit or abort marker takes one more offset in each partition
  it wrote.  Aborted records keep their offsets.  A ``read_committed``
  consumer reads up to the last stable offset (the first offset of a
  transaction still open), returns committed records only and steps over
  aborted records and markers, so its reads skip offsets.  A
  ``read_uncommitted`` one (``isolation``, mixed mode only) reads every
  record up to the end of the log, aborted and open ones too, and steps
  over markers only.
* **Outcomes.** Commits (``ok``), client aborts and abortable errors
  (``fail``; an error stops the transaction, so the micro-ops after it are
  ``skipped``), and unknown commits (``info``), whose real outcome is drawn
  (``Truth.committed_txns``) and which tear the client down, as do crashes
  between micro-ops (no completion; the next incarnation aborts it).
* **Consumers.** One group; ``assign`` (fixed partitions) or ``subscribe``
  (eager rebalances: every member revokes at its next poll, then the new
  assignment arrives at each member's next poll, from the committed
  offsets, and a transaction polling meanwhile lists the partitions in
  ``rebalanced``).  Offsets are committed inside each transaction (one past
  the last record read per partition).  After an abort the consumer seeks
  back to where the transaction's polls began (a ``seek`` line): the first
  offsets it polled, as ``workloads.txn_client`` seeks, or before them, when
  those polls first stepped over aborted records and markers, which the
  reads after the seek then step over again.
* **consume-transform-produce** (``mode="ctp"``): plain producers fill the
  topic, each transaction polls once and copies every record to
  ``<topic>-out`` with ``source``; a transaction that saw a rebalance
  aborts, so every input is copied exactly once by a committed transaction.
* **A final drain** per topic (``read_committed`` whatever ``isolation``
  says, as the harness's, from offset 0): every committed record and no
  aborted one.

API: ``generate(seed, txns, shape)`` returns a ``TxnHistory`` (the lines as
builder ops, the shape, the ground truth); ``histories()`` is a Hypothesis
strategy of them; ``config(shape)`` the run config to judge them under;
``write(path, ops, seed, shape)`` streams about ``ops`` lines to a file for
benchmarks (no list of ops kept).
"""

from __future__ import annotations

import random
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson

from testkit.builder import HistoryBuilder

TOPIC = "t"
GROUP = "t-txn"
_OPEN, _COMMITTED, _ABORTED = 0, 1, 2
_MARKER = -1  # the value of a commit/abort marker in the model's log
TP = tuple[str, int]
Emit = Callable[[int, str, str, Any], int]  # (process, type, f, value) -> index


@dataclass(frozen=True)
class Shape:
    """What a generated history is made of (probabilities are per transaction,
    ``crash_p`` and ``rebalance_p`` per step of the model)."""

    mode: str = "mixed"  # mixed | ctp
    consumer_mode: str = "assign"  # assign | subscribe
    processes: int = 3
    partitions: int = 3
    max_ops: int = 4
    abort_p: float = 0.15  # the client aborts on purpose
    error_p: float = 0.05  # an abortable error mid-transaction
    info_p: float = 0.05  # the commit's outcome is unknown
    crash_p: float = 0.01  # a client crash between two micro-ops
    rebalance_p: float = 0.02  # subscribe: a member rejoins, the group rebalances
    batch: int = 3  # records per partition a poll returns at most
    isolation: str = "read_committed"  # the consumers' (not the drain's); ctp: read_committed
    # A send's delivery report never came (per send that reached the log): its
    # offset, and half the time its partition, are recorded null, although the
    # record sits in the log all the same (docs/history.md allows both shapes).
    unreported_p: float = 0.0

    @property
    def topics(self) -> list[str]:
        return [TOPIC, f"{TOPIC}-out"] if self.mode == "ctp" else [TOPIC]


def config(shape: Shape) -> dict[str, Any]:
    """The run config (``config.json`` shape) the history is judged under."""
    return {
        "workload": "txn",
        "txn": {
            "processes": shape.processes,
            "max_ops": shape.max_ops,
            "mode": shape.mode,
            "isolation_level": "read_committed" if shape.mode == "ctp" else shape.isolation,
            "rewind": True,
        },
        "consumer": {"mode": shape.consumer_mode},
        "producer": {"acks": "all", "enable_idempotence": True},
    }


@dataclass
class Truth:
    """What really happened, which the history alone may not say."""

    committed: set[int] = field(default_factory=set)  # values in the log, committed
    aborted: set[int] = field(default_factory=set)  # values in the log, aborted
    committed_txns: dict[int, bool] = field(default_factory=dict)  # invoke index -> committed


@dataclass
class TxnHistory:
    ops: list[dict[str, Any]]
    shape: Shape
    truth: Truth
    seed: int

    @property
    def config(self) -> dict[str, Any]:
        return config(self.shape)


def generate(seed: int, txns: int = 30, shape: Shape | None = None) -> TxnHistory:
    """A valid history of about ``txns`` transactions (more in ctp: one per poll)."""
    shape = shape or Shape()
    b = HistoryBuilder()
    # Lost delivery reports are drawn apart: they never shift the draws that shape it.
    model = _Model(random.Random(seed), shape, b.op, reports=random.Random(~seed))
    model.run(lambda: model.started >= txns)
    return TxnHistory(b.ops, shape, model.truth, seed)


def _generate_with_lost_reports(seed: int, txns: int, shape: Shape) -> TxnHistory:
    """``generate``, with a fifth of the sends' delivery reports lost in every third
    history, picked by the seed: one more Hypothesis draw would shift every
    history the fixed-seed property tests generate."""
    return generate(seed, txns, replace(shape, unreported_p=0.2 if seed % 3 == 0 else 0.0))


def histories(max_txns: int = 40):
    """Hypothesis strategy of ``TxnHistory``: shapes and seeds drawn, the model runs."""
    from hypothesis import strategies as st

    shapes = st.builds(
        Shape,
        mode=st.sampled_from(["mixed", "ctp"]),
        consumer_mode=st.sampled_from(["assign", "subscribe"]),
        processes=st.integers(1, 4),
        partitions=st.integers(1, 4),
        max_ops=st.integers(1, 4),
        abort_p=st.sampled_from([0.0, 0.2, 0.5]),
        error_p=st.sampled_from([0.0, 0.1, 0.3]),
        info_p=st.sampled_from([0.0, 0.1, 0.3]),
        crash_p=st.sampled_from([0.0, 0.02, 0.1]),
        rebalance_p=st.sampled_from([0.0, 0.05, 0.2]),
        batch=st.integers(1, 4),
        isolation=st.sampled_from(["read_committed", "read_uncommitted"]),
    ).map(lambda s: replace(s, isolation="read_committed") if s.mode == "ctp" else s)
    return st.builds(
        _generate_with_lost_reports,
        seed=st.integers(0, 2**32 - 1),
        txns=st.integers(1, max_txns),
        shape=shapes,
    )


def write(path: Path, ops: int, seed: int = 1, shape: Shape | None = None) -> int:
    """Stream a history of about ``ops`` lines to ``path`` (benchmarks); returns the count."""
    shape = shape or Shape(crash_p=0.001, rebalance_p=0.001)
    with open(path, "wb") as fh:
        out = _Stream(fh)
        model = _Model(random.Random(seed), shape, out.op, keep_truth=False)
        model.run(lambda: out.index >= ops * 0.9)
        out.flush()
        return out.index


class _Stream:
    """Numbers, stamps and writes lines in batches (``write``)."""

    def __init__(self, fh) -> None:
        self.fh, self.index, self.time, self.buf = fh, 0, 0, []

    def op(self, process: int, type_: str, f: str, value: Any) -> int:
        self.time += 100_000
        line = {"index": self.index, "time": self.time, "process": process,
                "type": type_, "f": f, "value": value}  # fmt: skip
        self.buf.append(orjson.dumps(line, option=orjson.OPT_APPEND_NEWLINE))
        self.index += 1
        if len(self.buf) >= 50_000:
            self.flush()
        return self.index - 1

    def flush(self) -> None:
        self.fh.write(b"".join(self.buf))
        self.buf.clear()


class _Log:
    """Every partition's entries: a value, or a marker, and the transaction of each."""

    def __init__(self) -> None:
        self.values: dict[TP, array] = {}
        self.txn_of: dict[TP, array] = {}
        self.status = bytearray([_COMMITTED])  # transaction 0: plain sends
        self.open_first: dict[TP, dict[int, int]] = {}  # open txn -> its first offset here

    def new_txn(self) -> int:
        self.status.append(_OPEN)
        return len(self.status) - 1

    def append(self, tp: TP, value: int, txn: int) -> int:
        values = self.values.setdefault(tp, array("q"))
        self.txn_of.setdefault(tp, array("q")).append(txn)
        values.append(value)
        if txn:
            self.open_first.setdefault(tp, {}).setdefault(txn, len(values) - 1)
        return len(values) - 1

    def end(self, txn: int, committed: bool, wrote: set[TP]) -> None:
        self.status[txn] = _COMMITTED if committed else _ABORTED
        for tp in sorted(wrote):
            self.open_first[tp].pop(txn, None)
            self.append(tp, _MARKER, 0)

    def stable(self, tp: TP) -> int:
        """The last stable offset: a read_committed consumer reads below it only."""
        first = self.open_first.get(tp)
        return min(first.values()) if first else len(self.values.get(tp, ()))

    def read(
        self, tp: TP, pos: int, n: int, committed: bool = True
    ) -> tuple[list[tuple[int, int]], int]:
        """(offset, value) of up to ``n`` records from ``pos``, and the new position:
        committed ones below the last stable offset, or (``committed`` false)
        every record."""
        values, txn_of, status = self.values.get(tp, ()), self.txn_of.get(tp), self.status
        end = self.stable(tp) if committed else len(values)
        out = []
        while pos < end and len(out) < n:
            v = values[pos]
            if v != _MARKER and (not committed or status[txn_of[pos]] == _COMMITTED):
                out.append((pos, v))
            pos += 1
        return out, pos


@dataclass
class _Txn:
    invoke: int
    id: int
    plan: list[dict[str, Any]]
    done: list[dict[str, Any]] = field(default_factory=list)  # completed micro-ops
    ran: int = 0  # micro-ops of the plan run so far (ctp adds sends to ``done``)
    wrote: set[TP] = field(default_factory=set)
    first_polled: dict[TP, int] = field(default_factory=dict)
    # where its polls of a partition began since it was last assigned: what they
    # stepped over before first_polled is aborted records and markers
    began: dict[TP, int] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)
    rebalanced: set[TP] = field(default_factory=set)
    failed: str | None = None  # an abortable error stopped it


@dataclass
class _Proc:
    pid: int
    slot: int
    owned: list[TP] = field(default_factory=list)
    pos: dict[TP, int] = field(default_factory=dict)
    txn: _Txn | None = None
    assignment: list[TP] | None = None  # subscribe: arrives at the next poll


class _Model:
    def __init__(
        self,
        rnd: random.Random,
        shape: Shape,
        emit: Emit,
        keep_truth: bool = True,
        reports: random.Random | None = None,  # which delivery reports are lost
    ):
        self.rnd, self.shape, self.emit = rnd, shape, emit
        self.reports = reports or rnd
        self.log = _Log()
        self.truth = Truth()
        self.keep_truth = keep_truth
        self.committed: dict[TP, int] = {}  # the group's committed offsets
        self.value = 0
        self.next_pid = 1
        self.started = 0
        self.procs: list[_Proc] = []
        self.revoking: set[int] = set()  # subscribe: members yet to revoke
        self.producers = [self._pid() for _ in range(2)] if shape.mode == "ctp" else []
        self.inputs = [(TOPIC, p) for p in range(shape.partitions)]
        self.committed_only = shape.isolation == "read_committed" or shape.mode == "ctp"

    def _pid(self) -> int:
        self.next_pid += 1
        return self.next_pid - 1

    def _value(self) -> int:
        self.value += 1
        return self.value - 1

    # -- the run ---------------------------------------------------------------------

    def run(self, enough: Callable[[], bool]) -> None:
        for slot in range(self.shape.processes):
            self._join(slot)
        self._rebalance()
        rnd, shape = self.rnd, self.shape
        while True:
            stopping = enough()
            busy = [p for p in self.procs if p.txn is not None]
            if stopping and not busy:
                break
            if self.producers and not stopping and rnd.random() < 0.3:
                self._produce()
            if shape.consumer_mode == "subscribe" and rnd.random() < shape.rebalance_p:
                self._rebalance()
            proc = rnd.choice(busy if stopping else self.procs)
            if proc.txn is None:
                self._begin(proc)
            elif rnd.random() < shape.crash_p:
                self._crash(proc, "crash between micro-ops")
            else:
                self._step(proc)
        self._drain()

    def _join(self, slot: int) -> _Proc:
        proc = _Proc(self._pid(), slot)
        if self.shape.consumer_mode == "subscribe":
            value = {"group": GROUP, "topics": [TOPIC]}
            self.emit(proc.pid, "invoke", "subscribe", value)
            self.emit(proc.pid, "ok", "subscribe", value)
        else:
            n = self.shape.processes
            proc.owned = [tp for tp in self.inputs if tp[1] % n == slot]
            proc.pos = {tp: self.committed.get(tp, 0) for tp in proc.owned}
            value = {"group": GROUP, "partitions": [list(tp) for tp in proc.owned]}
            self.emit(proc.pid, "invoke", "assign", value)
            self.emit(proc.pid, "ok", "assign", value)
        self.procs.append(proc)
        return proc

    def _rebalance(self) -> None:
        """Eager: every member revokes at its next poll; then each gets its share."""
        if self.shape.consumer_mode != "subscribe":
            return
        members = self.procs[:]
        self.rnd.shuffle(members)
        for i, proc in enumerate(members):
            proc.assignment = [tp for tp in self.inputs if tp[1] % len(members) == i]
        self.revoking = {p.pid for p in self.procs if p.owned}

    def _callbacks(self, proc: _Proc) -> None:
        """Rebalance callbacks, which run inside a poll (as librdkafka's do)."""
        txn = proc.txn
        if proc.pid in self.revoking:
            value = {"group": GROUP, "assigned": [], "revoked": [list(tp) for tp in proc.owned]}
            self.emit(proc.pid, "ok", "rebalance", value)
            if txn:
                txn.rebalanced.update(proc.owned)
                for tp in proc.owned:
                    txn.began.pop(tp, None)
            proc.owned, proc.pos = [], {}
            self.revoking.discard(proc.pid)
        if not self.revoking and proc.assignment is not None:
            proc.owned, proc.assignment = proc.assignment, None
            proc.pos = {tp: self.committed.get(tp, 0) for tp in proc.owned}
            if proc.owned:
                value = {"group": GROUP, "assigned": [list(tp) for tp in proc.owned], "revoked": []}
                self.emit(proc.pid, "ok", "rebalance", value)
                if txn:
                    txn.rebalanced.update(proc.owned)

    def _produce(self) -> None:
        """consume-transform-produce input: a plain acknowledged send."""
        v, pid = self._value(), self.rnd.choice(self.producers)
        tp = self.rnd.choice(self.inputs)
        sent = {"topic": TOPIC, "key": str(v), "value": v}
        self.emit(pid, "invoke", "send", sent)
        offset = self.log.append(tp, v, 0)
        self.emit(pid, "ok", "send", {**sent, "partition": tp[1], "offset": offset})
        if self.keep_truth:
            self.truth.committed.add(v)

    # -- one transaction ---------------------------------------------------------------

    def _begin(self, proc: _Proc) -> None:
        self.started += 1
        if self.shape.mode == "ctp":
            plan = [{"f": "poll"}]
        else:
            plan = []
            for _ in range(self.rnd.randint(1, self.shape.max_ops)):
                if self.rnd.random() < 0.5:
                    plan.append({"f": "poll"})
                else:
                    v, p = self._value(), self.rnd.randrange(self.shape.partitions)
                    plan.append(
                        {"f": "send", "topic": TOPIC, "key": str(v), "value": v, "partition": p}
                    )
        invoke = self.emit(proc.pid, "invoke", "txn", {"group": GROUP, "ops": plan})
        proc.txn = _Txn(invoke, self.log.new_txn(), plan)

    def _step(self, proc: _Proc) -> None:
        txn = proc.txn
        assert txn is not None
        if txn.failed or txn.ran == len(txn.plan):
            self._complete(proc)
            return
        m = dict(txn.plan[txn.ran])
        txn.ran += 1
        if self.rnd.random() < self.shape.error_p / max(len(txn.plan), 1):
            txn.failed = "NOT_ENOUGH_REPLICAS" if m["f"] == "send" else "_TRANSPORT"
            if m["f"] == "send":
                m.update(partition=None, offset=None, error=txn.failed)
            else:
                m.update(records=[], error=txn.failed)
            txn.done.append(m)
            return
        if m["f"] == "send":
            self._send(txn, m)
            txn.done.append(m)
        else:
            txn.done.append(m)
            self._poll(proc, txn, m)

    def _send(self, txn: _Txn, m: dict[str, Any]) -> None:
        tp = (m["topic"], m["partition"])
        m["offset"] = self.log.append(tp, m["value"], txn.id)
        txn.wrote.add(tp)

    def _poll(self, proc: _Proc, txn: _Txn, m: dict[str, Any]) -> None:
        self._callbacks(proc)
        records = []
        order = proc.owned[:]
        self.rnd.shuffle(order)
        for tp in order:
            n = self.rnd.randint(0, self.shape.batch)
            txn.began.setdefault(tp, proc.pos[tp])
            got, proc.pos[tp] = self.log.read(tp, proc.pos[tp], n, self.committed_only)
            for offset, v in got:
                txn.first_polled.setdefault(tp, offset)
                records.append(
                    {
                        "topic": tp[0],
                        "partition": tp[1],
                        "offset": offset,
                        "key": str(v),
                        "value": v,
                    }
                )
        m["records"] = records
        txn.records += records
        if self.shape.mode == "ctp":
            for r in records:
                v = self._value()
                out = {"f": "send", "topic": f"{TOPIC}-out", "key": str(r["value"]), "value": v,
                       "partition": r["partition"], "source": r["value"]}  # fmt: skip
                self._send(txn, out)
                txn.done.append(out)

    def _complete(self, proc: _Proc) -> None:
        txn, rnd, shape = proc.txn, self.rnd, self.shape
        assert txn is not None
        ops = [self._as_reported(m) for m in txn.done] + self._skipped(txn)
        value: dict[str, Any] = {"group": GROUP, "ops": ops}
        offsets = _next_offsets(txn.records)
        if txn.rebalanced:
            value["rebalanced"] = [list(tp) for tp in sorted(txn.rebalanced)]
        if txn.failed or rnd.random() < shape.abort_p or (shape.mode == "ctp" and txn.rebalanced):
            why = txn.failed or ("rebalanced" if txn.rebalanced else "aborted by the client")
            self._end(proc, False)
            self.emit(proc.pid, "fail", "txn", {**value, "error": why})
            self._rewind(proc, txn)
            return
        if offsets:
            value["offsets"] = offsets
        if rnd.random() < shape.info_p:
            committed = rnd.random() < 0.5
            self._end(proc, committed, offsets)
            self.emit(proc.pid, "info", "txn", {**value, "error": "_TIMED_OUT: commit"})
            self._crash(proc, "transaction info: commit timed out")
            return
        self._end(proc, True, offsets)
        self.emit(proc.pid, "ok", "txn", value)

    def _as_reported(self, m: dict[str, Any]) -> dict[str, Any]:
        """A micro-op as the client recorded it: a send may lack its delivery report."""
        p = self.shape.unreported_p
        if m["f"] != "send" or m.get("offset") is None or not p or self.reports.random() >= p:
            return m
        lost = {"offset": None}
        if self.reports.random() < 0.5:
            lost["partition"] = None
        return {**m, **lost}

    @staticmethod
    def _skipped(txn: _Txn) -> list[dict[str, Any]]:
        return [{**m, "skipped": True} for m in txn.plan[txn.ran :]] if txn.failed else []

    def _end(self, proc: _Proc, committed: bool, offsets: list[list[Any]] = ()) -> None:
        txn = proc.txn
        assert txn is not None
        self.log.end(txn.id, committed, txn.wrote)
        if committed:
            for t, p, o in offsets:
                self.committed[(t, p)] = o
        if self.keep_truth:
            self.truth.committed_txns[txn.invoke] = committed
            sent = {
                m["value"] for m in txn.done if m["f"] == "send" and m.get("offset") is not None
            }
            (self.truth.committed if committed else self.truth.aborted).update(sent)
        proc.txn = None

    def _rewind(self, proc: _Proc, txn: _Txn) -> None:
        """Seek back where the aborted transaction's polls began, where still owned:
        its first offset polled, or the aborted records and markers they stepped
        over before it."""
        moved = [
            [t, p, min(o, txn.began.get((t, p), o))]
            for (t, p), o in sorted(txn.first_polled.items())
            if (t, p) in proc.pos
        ]
        if moved:
            for t, p, o in moved:
                proc.pos[(t, p)] = o
            value = {"group": GROUP, "offsets": moved, "reason": "rewind after abort"}
            self.emit(proc.pid, "ok", "seek", value)

    def _crash(self, proc: _Proc, reason: str) -> None:
        """The client is torn down; the next incarnation's init aborts what it left open."""
        if proc.txn is not None:
            self._end(proc, False)
        self.emit(proc.pid, "info", "crash", {"reason": reason})
        self.procs.remove(proc)
        self.revoking.discard(proc.pid)
        self._join(proc.slot)
        self._rebalance()

    # -- the end ------------------------------------------------------------------------

    def _drain(self) -> None:
        """read_committed, from the beginning of every partition of every topic."""
        for topic in self.shape.topics:
            pid = self._pid()
            tps = [(topic, p) for p in range(self.shape.partitions)]
            value = {"group": f"{topic}-drain", "partitions": [list(tp) for tp in tps],
                     "final": True}  # fmt: skip
            self.emit(pid, "invoke", "assign", value)
            self.emit(pid, "ok", "assign", value)
            for tp in tps:
                pos, end = 0, len(self.log.values.get(tp, ()))
                while True:  # at least one poll: a process with one is no group member
                    got, pos = self.log.read(tp, pos, 50)
                    records = [{"topic": tp[0], "partition": tp[1], "offset": o, "key": str(v),
                                "value": v} for o, v in got]  # fmt: skip
                    self.emit(pid, "invoke", "poll", {"final": True})
                    self.emit(pid, "ok", "poll", {"records": records, "final": True})
                    if pos >= end:
                        break
                bounds = {"log_start": 0, "high_watermark": end, "reached": pos}
                self.emit(pid, "ok", "drain", {"topic": tp[0], "partition": tp[1], **bounds,
                                               "final": True})  # fmt: skip


def _next_offsets(records: list[dict[str, Any]]) -> list[list[Any]]:
    """One past the highest offset read per partition (workloads.consumer.next_offsets)."""
    top: dict[TP, int] = {}
    for r in records:
        k = (r["topic"], r["partition"])
        top[k] = max(top.get(k, -1), r["offset"])
    return [[t, p, o + 1] for (t, p), o in sorted(top.items())]
