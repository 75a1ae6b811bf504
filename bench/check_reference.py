"""A reference for the check benchmarks: the four core queue checks in DuckDB.

    python bench/check_reference.py HISTORY [--config CONFIG_JSON] [--no-spark]
    python bench/check_reference.py --examples   # the unit tests' histories, their counts

Why: "how fast is the check" means little without what a user would pick
instead of Spark on one machine.  DuckDB (a bench-only dependency: ``pip
install -e '.[bench]'``) reads the same history.jsonl and counts lost-write,
duplicate, nonmonotonic-poll (order) and poll-skip as checkers/ does for a
queue history (send_checks, poll_checks, tables); this prints the Spark
check's wall time (``kafka-chaos check`` in a fresh process, as a user runs
it), DuckDB's, their ratio, and whether the four counts agree.  Exit 1 when
they do not: then one of the two is wrong about the history.

Transactions are out of scope (their reads and resets follow other rules):
a history with transaction lines is refused.  bench/check_scale.py calls
``duckdb_counts`` for every size it times.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the checkers' config view, without installing

CHECKS = ("lost-write", "duplicate", "nonmonotonic-poll", "poll-skip")

# One narrow table of lines, typed as read: only the fields the four checks use
# (a JSON column of every value took over 4 GB at 1e7 ops).
LINES = """
CREATE TEMP TABLE lines AS
SELECT "index" AS idx, CAST(process AS VARCHAR) AS process, type, f, value
FROM read_ndjson(?, columns = {
        'index': 'BIGINT', 'process': 'VARCHAR', 'type': 'VARCHAR', 'f': 'VARCHAR',
        'value': 'STRUCT(value BIGINT, topic VARCHAR, "partition" INTEGER, "offset" BIGINT,
                         records STRUCT(topic VARCHAR, "partition" INTEGER, "offset" BIGINT,
                                        value BIGINT)[],
                         assigned JSON, revoked JSON, offsets JSON, final BOOLEAN)'},
     maximum_object_size = 67108864)
WHERE process <> 'nemesis'
"""

SENDS = """
CREATE TEMP TABLE sends AS
SELECT idx, process, type, value.value AS val, value.topic AS topic,
       value.partition AS partition, value."offset" AS "offset"
FROM lines WHERE f = 'send'
"""

# Every polled record, with its place in its poll (j).
READS = """
CREATE TEMP TABLE reads AS
SELECT idx, process, r.topic AS topic, r.partition AS partition, r."offset" AS "offset",
       r.value AS val, j
FROM (
  SELECT idx, process, UNNEST(recs) AS r, UNNEST(range(len(recs))) AS j
  FROM (SELECT idx, process, value.records AS recs FROM lines WHERE f = 'poll' AND type = 'ok')
)
"""

# An observation of a value at an offset: a read, or a send's completion with an offset
# (checkers.frames.op_position).
POSITIONS = """
CREATE TEMP TABLE positions AS
SELECT val, topic, partition, "offset", false AS is_read, type = 'ok' AS is_ack FROM sends
WHERE type IN ('ok', 'fail', 'info') AND "offset" >= 0
UNION ALL
SELECT val, topic, partition, "offset", true, false FROM reads
"""

PER_POSITION = """
CREATE TEMP TABLE per_position AS
SELECT topic, partition, "offset", bool_or(is_read) AS is_read, bool_or(is_ack) AS acked
FROM positions GROUP BY ALL
"""

LOST_WRITE = """
WITH acked AS (
  SELECT val, min_by(topic, idx) AS topic, min_by(partition, idx) AS partition,
         min_by("offset", idx) AS "offset"
  FROM sends WHERE type = 'ok' AND val IS NOT NULL GROUP BY val),
read_values AS (SELECT DISTINCT val FROM reads WHERE val IS NOT NULL),
max_read AS (SELECT topic, partition, max("offset") AS max_read FROM reads GROUP BY ALL)
SELECT count(*) FROM acked a
JOIN max_read m USING (topic, partition)
WHERE a.val NOT IN (SELECT val FROM read_values) AND m.max_read > a."offset"
"""

DUPLICATE = """
WITH sent AS (SELECT DISTINCT val FROM sends WHERE type = 'invoke'),
acked AS (SELECT DISTINCT val FROM sends WHERE type = 'ok'),
spread AS (SELECT val FROM positions WHERE val IS NOT NULL GROUP BY val
           HAVING count(DISTINCT (topic, partition, "offset")) > 1)
SELECT count(*) FROM spread WHERE val IN (SELECT val FROM sent) AND val IN (SELECT val FROM acked)
"""

# The read streams of checkers/queue/poll_checks.py: per (process, topic, partition), a
# poll's reads of the partition, resets and seeks, ordered by line; suspicious pairs of
# consecutive reads across polls, and of records inside one poll.
PAIRS = """
CREATE TEMP TABLE pairs AS
WITH polls AS (
  SELECT idx, process, topic, partition, arg_min("offset", j) AS first,
         arg_max("offset", j) AS last
  FROM reads GROUP BY ALL),
streams AS (SELECT DISTINCT process, topic, partition FROM polls),
named AS (
  SELECT idx, process, UNNEST(CAST(coalesce(value.assigned, '[]') AS VARCHAR[][])
                              || CAST(coalesce(value.revoked, '[]') AS VARCHAR[][])) AS tp
  FROM lines WHERE f = 'rebalance'),
seek_items AS (
  SELECT idx, process, UNNEST(CAST(value.offsets AS VARCHAR[][])) AS tpo,
         UNNEST(range(CAST(json_array_length(value.offsets) AS BIGINT))) AS i
  FROM lines WHERE f = 'seek'),
seeks AS (  -- a partition named twice in one seek line: its last entry
  SELECT idx, process, tpo[1] AS topic, CAST(tpo[2] AS INTEGER) AS partition,
         CAST(tpo[3] AS BIGINT) AS "offset"
  FROM seek_items
  QUALIFY row_number() OVER (PARTITION BY idx, tpo[1], tpo[2] ORDER BY i DESC) = 1),
resets AS (
  SELECT idx, process, tp[1] AS topic, CAST(tp[2] AS INTEGER) AS partition FROM named
  UNION ALL SELECT idx, process, topic, partition FROM seeks WHERE "offset" < 0
  UNION ALL
  SELECT l.idx, l.process, s.topic, s.partition
  FROM lines l JOIN streams s USING (process) WHERE l.f IN ('subscribe', 'assign')),
entries AS (
  SELECT idx, process, topic, partition, first, last, false AS reset, false AS seek FROM polls
  UNION ALL SELECT idx, process, topic, partition, NULL, NULL, true, false FROM resets
  UNION ALL SELECT idx, process, topic, partition, NULL, "offset" - 1, false, true FROM seeks
  WHERE "offset" >= 0),
ordered AS (
  SELECT *,
    lag(last) OVER w AS prev_offset, lag(reset) OVER w AS prev_reset
  FROM entries
  WINDOW w AS (PARTITION BY process, topic, partition ORDER BY idx, reset))
SELECT process, topic, partition, idx, first AS "offset", prev_offset FROM ordered
WHERE NOT reset AND NOT seek AND NOT prev_reset
  AND (first <= prev_offset OR first > prev_offset + 1)
UNION ALL
SELECT process, topic, partition, idx, "offset", prev_offset FROM (
  SELECT *, lag("offset") OVER (PARTITION BY idx, topic, partition ORDER BY j) AS prev_offset
  FROM reads)
WHERE "offset" <= prev_offset OR "offset" > prev_offset + 1
"""

NONMONOTONIC_POLL = 'SELECT count(*) FROM pairs WHERE "offset" <= prev_offset'

# A jump skips data when an offset the reader must read lies strictly between where
# it was and where it landed (checkers.queue.poll_checks.skipping): under read_committed one
# that an ack or a read proves holds data; under read_uncommitted any known offset,
# but for the final drain, which reads committed data.
POLL_SKIP = """
WITH drain AS (
  SELECT DISTINCT process FROM lines
  WHERE f = 'poll' AND coalesce(value.final, false)),
jumps AS (
  SELECT *, {committed_all} OR process IN (SELECT process FROM drain) AS committed
  FROM pairs WHERE "offset" > prev_offset + 1)
SELECT count(*) FROM jumps j
WHERE EXISTS (
  SELECT 1 FROM per_position p
  WHERE p.topic = j.topic AND p.partition = j.partition
    AND p."offset" > j.prev_offset AND p."offset" < j."offset"
    AND (p.acked OR (j.committed AND p.is_read) OR NOT j.committed))
"""


class NotQueue(ValueError):
    """A history the reference does not judge (transactions, share groups)."""


def duckdb_counts(history: Path, read_committed: bool = True) -> tuple[float, dict[str, int]]:
    """Seconds and the four checks' counts of ``history``, computed by DuckDB.

    Under read_uncommitted a committed position is an acknowledged one
    (checkers.queue.queue_tables.QueueTables._committed), and every known one counts for the
    run's own consumers.
    """
    import duckdb  # bench-only: pip install -e '.[bench]'

    t0 = time.monotonic()
    # The memory Spark's driver gets (checkers/session.py): the machine is shared.
    con = duckdb.connect(config={"memory_limit": "4GB", "preserve_insertion_order": False})
    con.execute(LINES, [str(history)])
    txn = con.execute("SELECT count(*) FROM lines WHERE f IN ('txn', 'share-poll')").fetchone()
    if txn and txn[0]:
        raise NotQueue(f"{history}: transaction or share lines; the reference judges queues only")
    for sql in (SENDS, READS, POSITIONS, PER_POSITION, PAIRS):
        con.execute(sql)
    # read_committed: a committed position is acked or read; read_uncommitted: acked,
    # and the run's own consumers may not skip any known one.
    skip = POLL_SKIP.format(committed_all="true" if read_committed else "false")
    if read_committed:
        skip = skip.replace("OR NOT j.committed", "")
    else:
        skip = skip.replace("OR (j.committed AND p.is_read)", "")
    queries = {
        "lost-write": LOST_WRITE,
        "duplicate": DUPLICATE,
        "nonmonotonic-poll": NONMONOTONIC_POLL,
        "poll-skip": skip,
    }
    counts = {name: int(con.execute(sql).fetchone()[0]) for name, sql in queries.items()}
    con.close()
    return time.monotonic() - t0, counts


def read_committed_of(config: Path | None) -> bool:
    """The isolation level the run's consumers promised (checkers.spec_view); a run
    of another workload than the queue's, or of share groups, is refused."""
    raw: dict[str, Any] = json.loads(config.read_text()) if config else {}
    return isolation_of(raw)


def agreement(spark: dict[str, Any], duck: dict[str, int]) -> tuple[bool, str]:
    """Whether Spark's results.json and DuckDB's counts agree on the four checks, and how."""
    parts, same = [], True
    for name in CHECKS:
        ours = spark["checks"][name]["count"]
        same &= ours == duck[name]
        parts.append(f"{name} {ours}/{duck[name]}")
    return same, ("agree" if same else "DISAGREE") + " (spark/duckdb: " + ", ".join(parts) + ")"


def agree_examples() -> int:
    """DuckDB's counts of the hand-written histories of tests/unit/test_checker_examples.py
    against the counts each states (which its test holds Spark's checks to); 1 if any differ."""
    import tempfile

    sys.path[:0] = [str(HERE.parent / "tests" / "unit")]
    import test_checker_examples as examples  # type: ignore[import-not-found]

    from testkit.builder import HistoryBuilder

    differ = 0
    with tempfile.TemporaryDirectory(prefix="kc-reference-") as tmp:
        for name, (build, config, counts, *_) in examples.CASES.items():
            b = HistoryBuilder()
            build(b)
            path = Path(tmp) / f"{name}.jsonl"
            path.write_text("".join(line + "\n" for line in b.lines()))
            _, duck = duckdb_counts(path, isolation_of(config))
            wrong = {c: (counts.get(c, 0), duck[c]) for c in CHECKS if counts.get(c, 0) != duck[c]}
            differ += bool(wrong)
            shown = ", ".join(f"{c} {counts.get(c, 0)}/{duck[c]}" for c in CHECKS)
            print(f"{'agree   ' if not wrong else 'DISAGREE'} {name}: {shown}")
    print(f"{len(examples.CASES) - differ} of {len(examples.CASES)} examples agree "
          "(stated/duckdb)")  # fmt: skip
    return 1 if differ else 0


def isolation_of(config: dict[str, Any]) -> bool:
    """Whether ``config``'s consumers are read_committed; only queue runs without
    share groups are judged (mirror runs key values by topic, share runs ack)."""
    from kafka_chaos.checkers.spec_view import CheckedSpec

    spec = CheckedSpec.of(config)
    if spec.workload != "queue" or spec.share:
        kind = "share-group" if spec.share else spec.workload
        raise NotQueue(f"a {kind} run; the reference judges queue runs without share groups")
    return spec.read_committed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("history", type=Path, nargs="?", help="a history.jsonl")
    ap.add_argument("--config", type=Path)
    ap.add_argument("--no-spark", action="store_true", help="DuckDB's counts only")
    ap.add_argument(
        "--examples",
        action="store_true",
        help="count the unit tests' hand-written histories against the counts they state",
    )
    args = ap.parse_args()
    if args.examples:
        return agree_examples()
    if args.history is None or not args.history.is_file():
        raise SystemExit(f"{args.history}: no such file")
    try:
        read_committed = read_committed_of(args.config)
        duck_s, duck = duckdb_counts(args.history, read_committed)
    except NotQueue as e:
        raise SystemExit(str(e)) from None
    print(f"duckdb: {duck_s:.1f} s, {duck}", flush=True)
    if args.no_spark:
        return 0
    sys.path.insert(0, str(HERE))
    from timed_check import timed_check

    spark_s, results = timed_check(args.history, config=args.config)
    same, text = agreement(results, duck)
    print(f"spark (cold, fresh process): {spark_s:.1f} s for {results['ops']} ops")
    print(f"spark/duckdb: {spark_s / duck_s:.1f}x; {text}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
