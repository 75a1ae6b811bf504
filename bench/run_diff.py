"""Does a restructuring keep what a run writes?  One run per revision, compared (issue 47).

    python bench/run_diff.py BEFORE AFTER [--rounds 1] [--cluster-name rdiff]
                             [--store DIR] [-- RUN ARGS...]
    python bench/run_diff.py --runs RUN_DIR RUN_DIR    (two runs made already)

``bench/check_diff.py`` holds a check's output fixed on the same history; this
holds the rest of a run fixed: the lines the workload writes, the run
directory's files, the checks results.json holds, and the report's sections.
Two runs never write the same values (timing, leaders, fault instants), so
what is compared is each run's *shape*, and timing is dropped where it is the
only cause of a difference:

* the history's line shapes: (f, type, the value's keys) and a polled record's
  keys, with the keys and lines that only appear when something happened
  during a line (``BY_TIMING``, as tests/integration/_cli.py drops them);
* the run directory's file names (``logs/`` and per-node copies as patterns);
* results.json: the checks' names, each check's keys, and the verdict;
* config.json: every key path, and every value but the run's name and seed;
* report.html: its section headings in order, digits folded (a sequence diff).

Each revision is exported with check_diff's ``export`` and brings up its own
cluster with its own CLI (``cluster up``), runs once per round (``run`` with
the same seed and RUN ARGS, default a 30 s run with the default faults) and
takes the cluster down by name, all under /tmp/kc-itest.lock so no other
cluster test runs beside it.  The sides alternate by round.  A difference is a
regression or a timing shape the run did not hit the other time: ``--rounds 2``
and BEFORE on both sides tell them apart.  Exit 1 when any shape differs.
"""

from __future__ import annotations

import argparse
import difflib
import fcntl
import json
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_diff import Tree, export, imports_own, python  # noqa: E402

LOCK = Path("/tmp/kc-itest.lock")
DEFAULT_RUN = ("--time-limit", "30", "--seed", "4747")
# Keys present only when something happened during the line; lines present only when
# timing made them (a send whose outcome the client never learned).
BY_TIMING = frozenset({"rebalanced", "stalled_s", "closed"})
BY_TIMING_LINES = frozenset({("send", "info", ("error", "key", "topic", "value"))})
CONFIG_VOLATILE = frozenset({"name", "seed", "started_at", "topic_name_used", "run_id"})


@contextmanager
def machine_lock() -> Iterator[None]:
    """The lock every cluster test on this machine takes (tests/integration, helpers)."""
    with LOCK.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def kafka_chaos(tree: Tree, *argv: str, timeout: float = 1800) -> str:
    """``tree``'s CLI with ``argv``; its stdout, or exit with its last lines."""
    proc = python(tree, ["-m", tree.cli, *argv], timeout)
    if proc.returncode not in (0, 1, 2) or (argv[0] == "cluster" and proc.returncode):
        raise SystemExit(f"{tree.label}: {' '.join(argv)} exited {proc.returncode}:\n"
                         f"{proc.stdout[-2000:]}{proc.stderr[-3000:]}")  # fmt: skip
    return proc.stdout


def one_run(tree: Tree, cluster: str, store: Path, run_args: list[str]) -> Path:
    """Cluster up, one run, cluster down, with ``tree``'s own CLI; the run directory."""
    with machine_lock():
        kafka_chaos(tree, "cluster", "up", "--name", cluster)
        try:
            out = kafka_chaos(tree, "run", "--cluster-name", cluster, "--store", str(store),
                              *run_args)  # fmt: skip
        finally:
            kafka_chaos(tree, "cluster", "down", "--name", cluster, timeout=300)
    reports = [line.removeprefix("report: ") for line in out.splitlines()
               if line.startswith("report: ")]  # fmt: skip
    if not reports:
        raise SystemExit(f"{tree.label}: the run printed no report path:\n{out[-2000:]}")
    return Path(reports[-1]).parent


def history_shapes(run: Path) -> set[str]:
    out = set()
    for line in (run / "history.jsonl").read_text().splitlines():
        op = json.loads(line)
        value = op.get("value")
        keys = (tuple(sorted(set(value) - BY_TIMING)) if isinstance(value, dict)
                else type(value).__name__)  # fmt: skip
        if (op["f"], op["type"], keys) in BY_TIMING_LINES:
            continue
        out.add(f"{op['f']} {op['type']} {keys}")
        if isinstance(value, dict):
            for record in value.get("records", [])[:1]:
                out.add(f"{op['f']} {op['type']} record {tuple(sorted(record))}")
    return out


def file_shapes(run: Path) -> set[str]:
    """The run directory's files, node names and timestamps folded."""
    names = set()
    for path in run.rglob("*"):
        if path.is_file():
            rel = str(path.relative_to(run))
            rel = re.sub(r"\bn\d+\b", "nN", rel)
            names.add(re.sub(r"\d{8}T\d{6}Z|\d+", "#", rel))
    return names


def leaves(node: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every (key path, value) of a JSON document (keys may hold dots: a tuple)."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield from leaves(v, (*path, str(k)))
    else:
        yield path, node


def results_shapes(run: Path) -> set[str]:
    results = json.loads((run / "results.json").read_text())
    out = {f"verdict {results['verdict']}"}
    for name, check in results.get("checks", {}).items():
        out.add(f"check {name} keys {sorted(check)}")
        out.add(f"check {name} valid {check.get('valid')}")
    return out


def config_shapes(run: Path) -> set[str]:
    config = json.loads((run / "config.json").read_text())
    out = set()
    for path, value in leaves(config):
        shown = "<volatile>" if path[-1] in CONFIG_VOLATILE else json.dumps(value, sort_keys=True)
        out.add(f"{'.'.join(path)} = {shown}")
    return out


class _Headings(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag in ("h1", "h2", "h3"):
            self._in = tag
            self.found.append(f"{tag} ")

    def handle_endtag(self, tag: str) -> None:
        if tag == self._in:
            self._in = None

    def handle_data(self, data: str) -> None:
        if self._in:
            self.found[-1] += data


def report_shapes(run: Path) -> list[str]:
    parser = _Headings()
    parser.feed((run / "report.html").read_text())
    headings = [re.sub(r"\d[\d,.]*", "#", " ".join(h.split())) for h in parser.found]
    return list(dict.fromkeys(headings))  # in order: a section moved is a difference too


ASPECTS = {
    "history": history_shapes,
    "files": file_shapes,
    "results": results_shapes,
    "config": config_shapes,
    "report": report_shapes,
}


def compare(before: Path, after: Path) -> dict[str, tuple[list[str], list[str]]]:
    """Per aspect: what only BEFORE's run has, and what only AFTER's has."""
    diffs = {}
    for aspect, shapes in ASPECTS.items():
        a, b = shapes(before), shapes(after)
        if isinstance(a, list) and a != b:  # an order: the lines the sequences do not share
            changed = [d for d in difflib.ndiff(a, b) if d[:1] in "+-"]
            diffs[aspect] = ([d[2:] for d in changed if d[0] == "-"],
                             [d[2:] for d in changed if d[0] == "+"])  # fmt: skip
        elif isinstance(a, set) and a != b:
            diffs[aspect] = (sorted(a - b), sorted(b - a))
    return diffs


def report(r: int, before: Path, after: Path, labels: tuple[str, str]) -> bool:
    """Print round ``r``'s comparison; whether anything differed."""
    diffs = compare(before, after)
    print(f"round {r}: {before} vs {after}: "
          f"{'same shapes' if not diffs else 'DIFFERENT: ' + ', '.join(diffs)}")  # fmt: skip
    for aspect, (only_a, only_b) in diffs.items():
        for line in only_a:
            print(f"  {aspect}: only {labels[0]}: {line}")
        for line in only_b:
            print(f"  {aspect}: only {labels[1]}: {line}")
    return bool(diffs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--cluster-name", default="rdiff")
    parser.add_argument("--store", type=Path)
    parser.add_argument(
        "--runs",
        action="store_true",
        help="BEFORE and AFTER are run directories already made: compare them",
    )
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []  # `run` arguments, as given
    args = parser.parse_args(argv[: len(argv) - len(extra) - (1 if "--" in argv else 0)])
    if args.runs:
        return report(0, Path(args.before), Path(args.after), ("before", "after"))
    work = Path(tempfile.mkdtemp(prefix="run-diff-"))
    store = args.store or work / "store"
    trees = [export(rev, work / side) for rev, side in ((args.before, "a"), (args.after, "b"))]
    for tree in trees:
        imports_own(tree)
    run_args = [*DEFAULT_RUN, *extra]
    differed = False
    for r in range(args.rounds):
        order = trees if r % 2 == 0 else trees[::-1]
        runs = {t.label: one_run(t, args.cluster_name, store / f"r{r}-{i}", run_args)
                for i, t in enumerate(order)}  # fmt: skip
        before, after = runs[trees[0].label], runs[trees[1].label]
        differed |= report(r, before, after, (trees[0].label, trees[1].label))
    return 1 if differed else 0


if __name__ == "__main__":
    sys.exit(main())
