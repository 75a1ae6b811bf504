"""Where a test run's time went, worker by worker (issue 46: tests within their limits).

    python3 -m pytest -p no:cacheprovider -n 2 -v --durations=0 [PYTEST ARGS] > run.log
    python bench/tier_durations.py run.log [--top 15] [-- PYTEST ARGS]

The suite's wall time is that of its slowest pytest-xdist worker, and in the
full tier that is the worker holding every cluster test.  From one run's log
(``-v`` names each test's worker, ``--durations=0`` gives each phase's
seconds) this prints each worker's summed seconds and test count, the
slowest modules with their worker, and the slowest tests.  Given the run's
pytest arguments after ``--``, it also collects them (no test runs) and
replays the same per-test seconds through two scope orders on two workers:
xdist's own (largest scope by test count first) and the suite's
(tests/_xdist_order.py: cluster first, then unit modules by Spark tests), so
both orders are compared on the same figures from the same run.  The machine
is often loaded: compare within one log, not across logs.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter, OrderedDict, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUTCOME = re.compile(r"\[(gw\d+)\] \[\s*\d+%\] (?:PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+)")
PHASE = re.compile(r"([\d.]+)s (?:setup|call|teardown)\s+(\S+)")


def read_log(path: Path) -> tuple[dict[str, str], dict[str, float]]:
    """Each test's worker and its seconds (setup, call and teardown summed)."""
    worker: dict[str, str] = {}
    seconds: dict[str, float] = defaultdict(float)
    for line in path.read_text(errors="replace").splitlines():
        if m := OUTCOME.match(line):
            worker[m.group(2)] = m.group(1)
        elif m := PHASE.match(line):
            seconds[m.group(2)] += float(m.group(1))
    return worker, seconds


def collected(args: list[str]) -> list:
    """The items pytest collects for ``args`` (collection only, nothing runs)."""
    import pytest

    got: list = []

    class Keep:
        def pytest_collection_finish(self, session) -> None:
            got.extend(session.items)

    pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", *args], plugins=[Keep()])
    return got


def makespan(order: OrderedDict[str, list[str]], seconds: dict[str, float]) -> list[float]:
    """Two workers each taking the next scope when free: their summed seconds."""
    workers = [0.0, 0.0]
    for ids in order.values():
        k = workers.index(min(workers))
        workers[k] += sum(seconds.get(i, 0.0) for i in ids)
    return workers


def compare_orders(args: list[str], seconds: dict[str, float]) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from _xdist_order import longest_first, scope_of

    items = collected(args)

    def scopes(seq: list) -> OrderedDict[str, list[str]]:
        out: OrderedDict[str, list[str]] = OrderedDict()
        for item in seq:
            out.setdefault(scope_of(item.nodeid), []).append(item.nodeid)
        return out

    by_count = OrderedDict(sorted(scopes(items).items(), key=lambda kv: -len(kv[1])))
    ours = scopes(longest_first(items))
    for name, order in (("xdist by count", by_count), ("longest first", ours)):
        w = makespan(order, seconds)
        print(f"{name:15s}: workers {w[0]:8.1f} s {w[1]:8.1f} s   slowest {max(w):8.1f} s")


def main(argv: list[str]) -> int:
    own, pytest_args = argv, []
    if "--" in argv:
        i = argv.index("--")
        own, pytest_args = argv[:i], argv[i + 1 :]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path)
    parser.add_argument("--top", type=int, default=15)
    opts = parser.parse_args(own)
    if not opts.log.is_file():
        print(f"tier_durations: no such log: {opts.log}", file=sys.stderr)
        return 2
    worker, seconds = read_log(opts.log)
    if not seconds:
        print(f"tier_durations: {opts.log} has no --durations=0 lines", file=sys.stderr)
        return 2
    if not worker:
        print(f"tier_durations: {opts.log} names no workers (run pytest with -n and -v)",
              file=sys.stderr)  # fmt: skip
        return 2
    totals: dict[str, float] = defaultdict(float)
    counts: Counter[str] = Counter()
    modules: dict[tuple[str, str], float] = defaultdict(float)
    for test, s in seconds.items():
        w = worker.get(test, "?")
        totals[w] += s
        counts[w] += 1
        modules[(w, test.split("::", 1)[0])] += s
    for w in sorted(totals):
        print(f"{w}: {totals[w]:8.1f} s over {counts[w]} tests")
    print(f"-- slowest {opts.top} modules")
    for (w, module), s in sorted(modules.items(), key=lambda kv: -kv[1])[: opts.top]:
        print(f"{w} {s:8.1f} s  {module}")
    print(f"-- slowest {opts.top} tests")
    for test, s in sorted(seconds.items(), key=lambda kv: -kv[1])[: opts.top]:
        print(f"{worker.get(test, '?')} {s:8.1f} s  {test}")
    if pytest_args:
        print("-- the same seconds through both scope orders")
        compare_orders(pytest_args, seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
