"""Synthetic but realistic histories, for the checker benchmarks and the class archive.

Shape of a real run: producers acking ~1000 sends/s into 6 partitions, a
two-member consumer group polling in order and committing, a fault every
10 s with a few failed and indeterminate sends while it lasts, and a final
drain that re-reads everything.  Lines are built with string formatting (no
json.dumps per op), so 1e7 ops take seconds, not minutes.  The histories are
valid: every acked value is read.
"""

from __future__ import annotations

import random
from pathlib import Path

PARTITIONS = 6
PRODUCERS = (1, 2, 3, 4)
CONSUMERS = (10, 11)
SEND_GAP_NS = 1_000_000  # ~1000 sends/s
POLL_EVERY = 5  # one poll per this many sends


class Writer:
    """Numbers lines and buffers them; ``time`` advances a little per line."""

    def __init__(self, fh) -> None:
        self.fh, self.index, self.time, self.buf = fh, 0, 0, []

    def line(self, process: int | str, type_: str, f: str, value: str) -> None:
        proc = f'"{process}"' if isinstance(process, str) else process
        self.buf.append(
            f'{{"index":{self.index},"time":{self.time},"process":{proc},'
            f'"type":"{type_}","f":"{f}","value":{value}}}\n'
        )
        self.index += 1
        self.time += 20_000
        if len(self.buf) >= 100_000:
            self.flush()

    def flush(self) -> None:
        self.fh.write("".join(self.buf))
        self.buf.clear()


def _records(recs: list[tuple[int, int, int]]) -> str:
    return ",".join(
        f'{{"topic":"chaos","partition":{p},"offset":{o},"key":"{v}","value":{v}}}'
        for p, o, v in recs
    )


def generate(ops: int, path: Path, seed: int = 1) -> int:
    """Write about ``ops`` lines to ``path``; returns the exact count."""
    rnd = random.Random(seed)
    logs: list[list[int]] = [[] for _ in range(PARTITIONS)]
    read_to = [0] * PARTITIONS  # group position per partition
    owner = {p: CONSUMERS[p % len(CONSUMERS)] for p in range(PARTITIONS)}
    drain_lines = ops // 60  # the final drain polls 50 records per line pair
    with open(path, "w", encoding="utf-8") as fh:
        w = Writer(fh)
        for c in CONSUMERS:
            sub = '{"group":"g","topics":["chaos"]}'
            w.line(c, "invoke", "subscribe", sub)
            w.line(c, "ok", "subscribe", sub)
            mine = ",".join(f'["chaos",{p}]' for p in owner if owner[p] == c)
            w.line(c, "ok", "rebalance", f'{{"group":"g","assigned":[{mine}],"revoked":[]}}')
        value, fault, sends = 0, 0, 0
        fault_on = False
        while w.index < ops - drain_lines:
            w.time += SEND_GAP_NS
            if w.time // 10**10 != (w.time - SEND_GAP_NS) // 10**10:  # every 10 s
                fault_on = not fault_on
                fault += fault_on
                phase = "start" if fault_on else "end"
                w.line(
                    "nemesis",
                    "info",
                    "kill",
                    f'{{"phase":"{phase}","id":{fault},"targets":["n2"]}}',
                )
            pid, p = rnd.choice(PRODUCERS), rnd.randrange(PARTITIONS)
            send = f'"topic":"chaos","key":"{value}","value":{value}'
            w.line(pid, "invoke", "send", "{" + send + "}")
            roll = rnd.random()
            if fault_on and roll < 0.01:
                w.line(pid, "fail", "send", "{" + send + ',"error":"not leader"}')
            elif fault_on and roll < 0.02:
                if rnd.random() < 0.5:
                    logs[p].append(value)
                w.line(pid, "info", "send", "{" + send + ',"error":"timed out"}')
            else:
                logs[p].append(value)
                extra = f',"partition":{p},"offset":{len(logs[p]) - 1}'
                w.line(pid, "ok", "send", "{" + send + extra + "}")
            value += 1
            sends += 1
            if sends % POLL_EVERY == 0:
                q = rnd.randrange(PARTITIONS)
                start, end = read_to[q], min(len(logs[q]), read_to[q] + 2 * POLL_EVERY)
                recs = [(q, o, logs[q][o]) for o in range(start, end)]
                read_to[q] = end
                w.line(owner[q], "invoke", "poll", "null")
                w.line(owner[q], "ok", "poll", '{"records":[' + _records(recs) + "]}")
                if sends % (POLL_EVERY * 50) == 0:
                    offs = ",".join(
                        f'["chaos",{p},{read_to[p]}]' for p in owner if owner[p] == owner[q]
                    )
                    w.line(owner[q], "ok", "commit", f'{{"group":"g","offsets":[{offs}]}}')
        for c in CONSUMERS:
            w.line(c, "info", "crash", '{"reason":"final drain"}')
        everything = ",".join(f'["chaos",{p}]' for p in range(PARTITIONS))
        w.line(99, "invoke", "assign", f'{{"group":null,"partitions":[{everything}]}}')
        w.line(99, "ok", "assign", f'{{"group":null,"partitions":[{everything}]}}')
        for p in range(PARTITIONS):
            for start in range(0, len(logs[p]), 50):
                recs = [(p, o, logs[p][o]) for o in range(start, min(start + 50, len(logs[p])))]
                w.line(99, "invoke", "poll", '{"final":true}')
                w.line(99, "ok", "poll", '{"records":[' + _records(recs) + '],"final":true}')
        for p in range(PARTITIONS):  # the drain's proof that it read every log to its end
            end = len(logs[p])
            bounds = f'"log_start":0,"high_watermark":{end},"reached":{end}'
            w.line(99, "ok", "drain", f'{{"topic":"chaos","partition":{p},{bounds},"final":true}}')
        w.flush()
        return w.index
