"""Which versions are affected: a finding's recipe replayed across versions, N runs each.

An upstream report needs "affects versions", and a rate measured on one
version says nothing about its neighbours.  This replays one recipe on a grid
of versions, ``--runs`` times per cell, and prints per cell the runs, the runs
that showed the anomaly and the rate with its 95 % Wilson interval.  Adjacent
versions are compared by a two-sided Fisher exact test: only where p < 0.05
does it mark the last good and first bad version (or, going the other way,
the last bad and first good); elsewhere it says the difference is not
significant, and, when the runs are too few for any difference to reach
p < 0.05, says that too.

Two kinds of recipe:

    python bench/versions.py --command 'evidence/NAME/repro/run {version}' \\
        --versions 4.0.2,4.1.2,4.3.1,4.4.0 --runs 3

a reproducer outside the harness, one run per invocation, ``{version}``
replaced by each version (``env KAFKA_VERSION={version} ...`` sets a
variable): exit 1 is the anomaly, 0 none, anything else "could not run",
counted apart and not as a run.  With ``--venv-package confluent-kafka``
each version's run goes through a virtual environment of its own holding
``confluent-kafka==VERSION`` (the same cached venvs as ``--run`` below):
``{python}`` in the command is that venv's interpreter and its bin directory
is first on PATH, so a reproducer written against the client library is
replayed on old clients without installing over the released one; a version
whose wheel will not install is "could not run", in one line.  Without it,
``{python}`` is this interpreter;

    python bench/versions.py --run evidence/NAME --kafka 3.9.2,4.4.0 \\
        [--confluent-kafka 2.12.0,2.16.1] --runs 5

the harness recipe: the run's config.json and schedule.json replayed as
bench/attribution.py does, with ``cluster.kafka_version`` set to each Kafka
version (fetched from Maven Central if not cached).  The Java client is the
cluster's version.  For librdkafka, each ``--confluent-kafka`` version gets
its own virtual environment under the kafka-chaos cache directory (made with
``--system-site-packages``, so the harness and everything else come from the
system and only the client differs), and every run is executed by a child
process of the cell's interpreter; the released client is never replaced.

Each finished run is appended to ``OUT/record.jsonl`` (and flushed) before
the next starts, with its output under ``OUT/logs/``: a grid that was
stopped resumes where it was, with the same command (cells already holding
``--runs`` runs are not repeated), and the table is always rebuilt from the
record.  ``--table OUT`` prints the table from the record alone.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench.attribution, run anywhere

from kafka_chaos.harness.rates import fisher_p, wilson  # noqa: E402

RECORD = "record.jsonl"
TABLE = "table.md"
ANOMALY, NONE, COULD_NOT_RUN = "anomaly", "none", "could not run"
RESULT_TAG = "KC-VERSIONS-RESULT "  # the child's last line in --run mode
VERSION_RE = re.compile(r"^[0-9]+(\.[0-9]+){1,3}([.-][A-Za-z0-9]+)?$")
# A PyPI project name (PEP 508): it goes into a pip requirement and a directory name,
# so "x==1", "x; sys_platform..." or "../y" must not get through.
PACKAGE_RE = re.compile(r"^([A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9])$")
ALPHA = 0.05


class Refused(Exception):
    """Bad input or an unusable record: one line for the user, no traceback."""


# ---------------------------------------------------------------- outcomes


def outcome_of_exit(code: int) -> str:
    """A reproducer's exit status as an outcome: 1 anomaly, 0 none, else could not run.

    Only 0 and 1 are verdicts. 2 is the reproducers' own "could not run", and
    any other status (a crash, a signal, a missing program) is no verdict
    either: counting it as "none" would dilute the rate with runs that never
    looked.
    """
    if code == 1:
        return ANOMALY
    if code == 0:
        return NONE
    return COULD_NOT_RUN


@dataclass
class Cell:
    """One version's (or version pair's) tally, rebuilt from the record."""

    label: str
    axes: dict[str, str]
    runs: int = 0
    hits: int = 0
    failed: int = 0

    def add(self, outcome: str) -> None:
        if outcome == COULD_NOT_RUN:
            self.failed += 1
        else:
            self.runs += 1
            self.hits += outcome == ANOMALY


# ---------------------------------------------------------------- the record


def load_record(path: Path) -> list[dict[str, Any]]:
    """The record's lines.  A torn last line (the grid killed while writing it) is
    dropped, as that run was never recorded; a bad line elsewhere is refused."""
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    out = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                continue
            raise Refused(f"{path}: line {i + 1} is not JSON; fix or remove it") from None
        if not isinstance(entry, dict) or not {"cell", "outcome", "axes"} <= entry.keys():
            raise Refused(f"{path}: line {i + 1} is not a versions record line")
        out.append(entry)
    return out


def append_record(path: Path, entry: dict[str, Any]) -> None:
    """One line, flushed and synced before the next run starts (what resuming trusts)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.write(json.dumps(entry, sort_keys=True) + "\n")
        f.flush()
        os.fsync(f.fileno())


def check_recipe(entries: list[dict[str, Any]], recipe: dict[str, Any], path: Path) -> None:
    """Refuse to mix two recipes' runs in one record: their rates would not be one rate."""
    for e in entries:
        if e.get("recipe") != recipe:
            raise Refused(
                f"{path} holds runs of another recipe ({json.dumps(e.get('recipe'))}); "
                "give another --out"
            )


def tally(entries: Iterable[dict[str, Any]], grid: Sequence[Cell] = ()) -> list[Cell]:
    """Cells in grid order, then any other cell of the record in order of appearance."""
    cells: dict[str, Cell] = {c.label: Cell(c.label, dict(c.axes)) for c in grid}
    for e in entries:
        cell = cells.setdefault(e["cell"], Cell(e["cell"], dict(e["axes"])))
        cell.add(e["outcome"])
    return list(cells.values())


def still_to_run(entries: Iterable[dict[str, Any]], label: str, runs: int) -> int:
    """Runs the cell still needs: ``runs`` less its recorded verdicts (not its failures)."""
    done = sum(1 for e in entries if e["cell"] == label and e["outcome"] != COULD_NOT_RUN)
    return max(0, runs - done)


# ---------------------------------------------------------------- the table


def rate_cell(hits: int, runs: int) -> str:
    if runs == 0:
        return "-"
    lo, hi = wilson(hits, runs)
    return f"{hits / runs:.0%} ({lo * 100:.0f}-{hi * 100:.0f}%)"


def adjacent_pairs(cells: Sequence[Cell]) -> list[tuple[str, Cell, Cell]]:
    """Neighbours along each axis, the other axes held equal; cells without runs skipped.

    The grid's order is the versions' order (oldest first, as given), so the
    neighbour of 4.1.2 is the next version that has runs, and with two axes
    (Kafka x confluent-kafka) each client version is compared along Kafka's
    versions and each Kafka version along the clients'.
    """
    pairs = []
    names = list(cells[0].axes) if cells else []
    for axis in names:
        groups: dict[tuple, list[Cell]] = {}
        for c in cells:
            others = tuple((k, v) for k, v in c.axes.items() if k != axis)
            groups.setdefault(others, []).append(c)
        for group in groups.values():
            ran = [c for c in group if c.runs > 0]
            if len({c.axes.get(axis) for c in group}) < 2:
                continue
            pairs += [(axis, a, b) for a, b in zip(ran, ran[1:], strict=False)]
    return pairs


def smallest_p(n_a: int, n_b: int) -> float:
    """The lowest two-sided Fisher p that n_a and n_b runs can give (none of one, all of
    the other): when it is not below 0.05, no grid of this size can mark anything."""
    return fisher_p(0, n_a, n_b, n_b)


def readings(cells: Sequence[Cell]) -> tuple[list[str], dict[str, list[str]]]:
    """Per adjacent pair a sentence, and the marks (last good, first bad, ...) by cell."""
    lines: list[str] = []
    marks: dict[str, list[str]] = {}
    for axis, a, b in adjacent_pairs(cells):
        p = fisher_p(a.hits, a.runs, b.hits, b.runs)
        head = (
            f"{axis}: {a.axes[axis]} {a.hits}/{a.runs} vs {b.axes[axis]} {b.hits}/{b.runs}"
            + (f" ({', '.join(f'{k} {v}' for k, v in a.axes.items() if k != axis)})"
               if len(a.axes) > 1 else "")
            + f": Fisher p = {p:.2g}"
        )  # fmt: skip
        if p < ALPHA:
            worse = b.hits / b.runs > a.hits / a.runs
            first, second = ("last good", "first bad") if worse else ("last bad", "first good")
            marks.setdefault(a.label, []).append(f"{first} ({axis})")
            marks.setdefault(b.label, []).append(f"{second} ({axis})")
            lines.append(f"{head} < 0.05: {first} {a.axes[axis]}, {second} {b.axes[axis]}")
        elif a.hits * b.runs == b.hits * a.runs:
            lines.append(f"{head}: the same rate, no mark")
        else:
            floor = smallest_p(a.runs, b.runs)
            why = (
                f"; with {a.runs} and {b.runs} runs no difference can reach p < 0.05 "
                f"(smallest possible p = {floor:.2g})"
                if floor >= ALPHA
                else ""
            )
            lines.append(f"{head}: not a significant difference, no mark{why}")
    return lines, marks


def table_lines(cells: Sequence[Cell], recipe: dict[str, Any] | None = None) -> list[str]:
    """The markdown table, then one reading per adjacent pair."""
    out = []
    if recipe:
        out.append(f"recipe: {json.dumps(recipe, sort_keys=True)}")
        out.append("")
    reads, marks = readings(cells)
    out.append("| version | runs | anomaly | rate (95 % Wilson) | could not run | mark |")
    out.append("|---|---|---|---|---|---|")
    for c in cells:
        mark = "; ".join(marks.get(c.label, [])) or ""
        out.append(
            f"| {c.label} | {c.runs} | {c.hits} | {rate_cell(c.hits, c.runs)} | {c.failed} "
            f"| {mark} |"
        )
    out.append("")
    out += reads or ["no two adjacent cells both have runs: nothing to compare"]
    return out


# ---------------------------------------------------------------- running


def versions_arg(text: str) -> list[str]:
    """A comma-separated version list; each must look like a version (it is put into
    a command line, a Maven coordinate or a pip requirement)."""
    got = [v.strip() for v in text.split(",") if v.strip()]
    if not got:
        raise Refused("an empty version list")
    for v in got:
        if not VERSION_RE.match(v):
            raise Refused(f"{v!r} is not a version (like 4.3.1)")
    if len(set(got)) != len(got):
        raise Refused(f"a version is named twice in {text!r}")
    return got


def safe(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9.+-]+", "_", label).strip("_")


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def run_grid(
    out: Path,
    recipe: dict[str, Any],
    grid: Sequence[Cell],
    runs: int,
    one_run: Any,
    give_up: int,
) -> list[Cell]:
    """Run every cell up to ``runs`` recorded verdicts, each run recorded as it ends.

    ``one_run(cell, log_path) -> (outcome, exit_code, detail)``.  A cell that
    could not run ``give_up`` times in a row is left for now (a version whose
    test jar is not served fails the same way every time); the next
    invocation tries it again.
    """
    record = out / RECORD
    entries = load_record(record)
    check_recipe(entries, recipe, record)
    for cell in grid:
        todo = still_to_run(entries, cell.label, runs)
        if todo == 0:
            print(f"{cell.label}: {runs} runs already recorded", flush=True)
            continue
        in_a_row = 0
        while todo and in_a_row < give_up:
            k = sum(1 for e in entries if e["cell"] == cell.label) + 1
            log = out / "logs" / f"{safe(cell.label)}-{k:03d}.out"
            log.parent.mkdir(parents=True, exist_ok=True)
            started = time.monotonic()
            outcome, code, detail = one_run(cell, log)
            entry = {
                "recipe": recipe, "cell": cell.label, "axes": cell.axes, "outcome": outcome,
                "exit": code, "seconds": round(time.monotonic() - started, 1), "at": now(),
                "log": str(log.relative_to(out)), "detail": detail,
            }  # fmt: skip
            append_record(record, entry)
            entries.append(entry)
            print(f"{cell.label} #{k}: {outcome} (exit {code}, {entry['seconds']} s)", flush=True)
            if outcome == COULD_NOT_RUN:
                in_a_row += 1
            else:
                in_a_row = 0
                todo -= 1
        if todo:
            print(f"{cell.label}: could not run {give_up} times in a row; left for now")
    return tally(entries, grid)


def relative_paths(text: str) -> str:
    """The output with the working directory's prefix taken off its paths: the logs are
    kept with a finding, and a path of the machine that ran them means nothing elsewhere."""
    return text.replace(str(Path.cwd()) + os.sep, "")


def package_arg(name: str) -> str:
    """A ``--venv-package`` name, refused unless it is a bare PyPI project name: the
    version is the grid's to pin, and the name also names the venv's directory."""
    if not PACKAGE_RE.match(name):
        raise Refused(f"{name!r} is not a package name (like confluent-kafka; no version)")
    return name


def command_argv(template: str, version: str, python: Path) -> list[str]:
    """The reproducer's argv for one version: ``{version}`` and ``{python}`` filled in.

    The interpreter's path is quoted before splitting, so a cache directory
    with a space in it stays one word; the version needs no quoting, as
    versions_arg let through only dots, digits and letters.
    """
    text = template.replace("{version}", version).replace("{python}", shlex.quote(str(python)))
    return shlex.split(text)


def command_env(python: Path) -> dict[str, str]:
    """This environment with the interpreter's bin directory first on PATH: a
    reproducer that calls ``python3`` (or a tool the package installs) without
    ``{python}`` still gets the cell's client, not the system's."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(python.parent), env.get("PATH", "")])
    return env


def command_runner(template: str, timeout_s: float, package: str | None = None) -> Any:
    """One invocation of the reproducer per run, its output kept in the run's log.

    With ``package``, the run's interpreter is the version's venv (made on the
    first run of the cell); a venv that cannot be made is that run's "could
    not run", so run_grid's give-up skips a version whose wheel does not
    install after two tries instead of failing the grid.
    """

    def one_run(cell: Cell, log: Path) -> tuple[str, int | None, str]:
        version = cell.axes["version"]
        if package:
            try:
                python = venv_python(version, package)
            except Refused as e:
                log.write_text(str(e) + "\n")
                return COULD_NOT_RUN, None, str(e)
        else:
            python = Path(sys.executable)
        argv = command_argv(template, version, python)
        with open(log, "wb") as f:
            try:
                proc = subprocess.run(
                    argv, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    timeout=timeout_s, check=False, env=command_env(python),
                )  # fmt: skip
            except FileNotFoundError:
                return COULD_NOT_RUN, None, f"no such program: {argv[0]}"
            except PermissionError:
                return COULD_NOT_RUN, None, f"not executable: {argv[0]}"
            except subprocess.TimeoutExpired:
                return COULD_NOT_RUN, None, f"timed out after {timeout_s:.0f} s"
        text = relative_paths(log.read_text(errors="replace"))
        log.write_text(text)
        last = text.strip().splitlines()[-1:] or [""]
        return outcome_of_exit(proc.returncode), proc.returncode, last[0][:300]

    return one_run


# ---- --run: the harness recipe


def venv_python(version: str, package: str = "confluent-kafka") -> Path:
    """``package`` at ``version`` in a virtual environment of its own, made once.

    ``--system-site-packages`` so the harness, scipy, Spark and the rest come
    from the system site: only the client differs between cells.  The venv's
    own site-packages comes first on its path, so its package wins.  The
    check reads the installed distribution's metadata rather than the
    module's own version call, which is a string in confluent-kafka 2.16 and
    a (string, int) tuple in older releases.
    """
    from kafka_chaos.harness.cache import cache_root

    package = package_arg(package)
    root = cache_root("venvs") / f"{package}-{version}"
    python = root / "bin" / "python"
    ready = root / ".kc-ready"
    if ready.exists():
        return python
    print(f"making a venv for {package} {version} in {root}", flush=True)
    steps = [
        [sys.executable, "-m", "venv", "--system-site-packages", str(root)],
        [str(python), "-m", "pip", "install", "--quiet", f"{package}=={version}"],
    ]
    for argv in steps:
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        if proc.returncode:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["?"]
            raise Refused(f"{package} {version}: {' '.join(argv[-2:])} failed: {tail[0]}")
    got = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))",
         package], capture_output=True, text=True, check=False,
    ).stdout.strip()  # fmt: skip
    if got != version:
        raise Refused(f"the venv for {package} {version} holds {got or 'nothing'}")
    ready.write_text(version + "\n")
    return python


def harness_imports(python: Path) -> str | None:
    """Why the harness cannot run on this interpreter's client, or None if it can.

    The harness imports confluent-kafka names that older releases lack (the
    share consumer's, for one), and a cell that cannot even import the
    harness should say so in one line, not as a child's traceback per run.
    """
    proc = subprocess.run(
        [str(python), "-c", "import kafka_chaos.run"], capture_output=True, text=True,
        cwd=Path(__file__).resolve().parent.parent, check=False,
    )  # fmt: skip
    if proc.returncode == 0:
        return None
    last = proc.stderr.strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
    line = re.sub(r" \(/[^)]*\)", "", last[0])  # the module's file: a path of this machine
    return f"the harness does not import with this client: {line}"


def harness_runner(
    run_dir: Path, client: str, cluster: str, store: Path, out: Path, timeout_s: float
) -> Any:
    """One replay of the finding per run, by a child process of the cell's interpreter."""
    from bench.attribution import finding

    layer, failed = finding(run_dir)
    layer["cluster"] = {**layer["cluster"], "name": cluster}
    unusable: dict[Path, str | None] = {}

    def one_run(cell: Cell, log: Path) -> tuple[str, int | None, str]:
        version = cell.axes["kafka"]
        try:
            python = venv_python(cell.axes["confluent-kafka"]) if "confluent-kafka" in cell.axes \
                else Path(sys.executable)  # fmt: skip
        except Refused as e:
            return COULD_NOT_RUN, None, str(e)
        if python not in unusable:
            unusable[python] = harness_imports(python)
        if unusable[python]:
            log.write_text(unusable[python] + "\n")
            return COULD_NOT_RUN, None, unusable[python]
        spec_file = out / "layers" / f"{safe(cell.label)}.json"
        spec_file.parent.mkdir(parents=True, exist_ok=True)
        cell_layer = {**layer, "cluster": {**layer["cluster"], "kafka_version": version}}
        spec_file.write_text(json.dumps(cell_layer, indent=1, sort_keys=True))
        name = f"versions-{run_dir.name}-{safe(cell.label)}"
        argv = [str(python), str(Path(__file__).resolve()), "--child", str(spec_file),
                "--client", client, "--store", str(store), "--name", name]  # fmt: skip
        with open(log, "wb") as f:
            try:
                proc = subprocess.run(
                    argv, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    timeout=timeout_s, check=False,
                )  # fmt: skip
            except subprocess.TimeoutExpired:
                return COULD_NOT_RUN, None, f"timed out after {timeout_s:.0f} s"
        text = relative_paths(log.read_text(errors="replace"))
        log.write_text(text)
        lines = text.splitlines()
        results = [json.loads(x[len(RESULT_TAG) :]) for x in lines if x.startswith(RESULT_TAG)]
        if not results:
            last = [x for x in lines if x.strip()][-1:] or ["no output"]
            return COULD_NOT_RUN, proc.returncode, f"no result from the run: {last[0][:300]}"
        got = results[-1]
        if isinstance(got["counts"], str):
            return COULD_NOT_RUN, proc.returncode, got["counts"]
        hit = any(got["counts"].get(c) for c in failed)
        detail = json.dumps({"counts": got["counts"], "client": got["client"],
                             "run_dir": got["run_dir"]}, sort_keys=True)  # fmt: skip
        return (ANOMALY if hit else NONE), proc.returncode, detail

    return one_run


def child(spec_file: Path, client: str, store: Path, name: str) -> int:
    """In the cell's interpreter: one run, its counts printed as the last line."""
    from bench.attribution import run_once

    layer = json.loads(spec_file.read_text())
    info: dict[str, Any] = {"python": Path(sys.prefix).name}  # the venv, not a machine path
    if client == "librdkafka":
        import confluent_kafka

        info["confluent-kafka"] = confluent_kafka.version()
        info["librdkafka"] = confluent_kafka.libversion()[0]
    else:
        info["kafka-clients"] = layer["cluster"]["kafka_version"]
    before = set(store.glob("*/*")) if store.exists() else set()
    counts = run_once(layer, client, store, name)
    after = sorted(set(store.glob("*/*")) - before) if store.exists() else []
    result = {"counts": counts, "client": info, "run_dir": str(after[-1]) if after else None}
    print(RESULT_TAG + json.dumps(result), flush=True)
    return 0


# ---------------------------------------------------------------- the command


def default_out(name: str) -> Path:
    return Path("store-bench") / f"versions-{safe(name)}"


def command_name(template: str) -> str:
    """The finding's name when the reproducer lives under evidence/NAME/, else the program's."""
    words = shlex.split(template)
    for w in words:
        parts = Path(w).parts
        if "evidence" in parts and parts.index("evidence") + 1 < len(parts):
            return parts[parts.index("evidence") + 1]
    programs = [w for w in words if "=" not in w and w != "env"]
    return Path(programs[0]).name if programs else "command"


def print_table(out: Path, cells: Sequence[Cell], recipe: dict[str, Any] | None) -> None:
    lines = table_lines(cells, recipe)
    print("\n".join(lines))
    (out / TABLE).write_text("\n".join(lines) + "\n")


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--command", help="a reproducer's command line, with {version}")
    what.add_argument("--run", type=Path, help="a run directory (config.json, schedule.json)")
    what.add_argument("--table", type=Path, metavar="OUT", help="print the table of a record")
    what.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--versions", help="--command: versions, oldest first (comma-separated)")
    p.add_argument(
        "--venv-package", help="--command: run each version in a venv with PACKAGE==version"
    )
    p.add_argument("--kafka", help="--run: Kafka versions, oldest first")
    p.add_argument("--confluent-kafka", help="--run, librdkafka: confluent-kafka versions")
    p.add_argument("--client", choices=("java", "librdkafka"), help="--run: the finding's own")
    p.add_argument("--runs", type=int, default=5, help="runs per cell (default 5)")
    p.add_argument("--out", type=Path, help="record directory (store-bench/versions-<name>)")
    p.add_argument("--give-up", type=int, default=2, help="failures in a row that skip a cell")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per run")
    p.add_argument("--cluster-name", default="versions", help="--run: the local cluster")
    p.add_argument("--store", type=Path, help="--run: run directories (OUT/runs)")
    p.add_argument("--name", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    if args.child:
        return child(args.child, args.client, args.store, args.name)
    if args.runs < 1 or args.give_up < 1:
        raise Refused("--runs and --give-up must be at least 1")
    if args.table:
        record = args.table / RECORD
        if not record.exists():
            raise Refused(f"{record}: no such record")
        entries = load_record(record)
        recipe = entries[-1].get("recipe") if entries else None
        print("\n".join(table_lines(tally(entries), recipe)))
        return 0
    if args.command:
        if "{version}" not in args.command:
            raise Refused("--command must contain {version}, where each version goes")
        if not args.versions:
            raise Refused("--command needs --versions")
        if args.kafka or args.confluent_kafka:
            raise Refused("--kafka and --confluent-kafka go with --run; --command takes --versions")
        grid = [Cell(v, {"version": v}) for v in versions_arg(args.versions)]
        package = package_arg(args.venv_package) if args.venv_package else None
        recipe = {"kind": "command", "command": args.command}
        if package:
            recipe["venv_package"] = package  # another client per cell: another recipe
        out = args.out or default_out(command_name(args.command))
        one_run = command_runner(args.command, args.timeout, package)
    else:
        run_dir = args.run
        for f in ("config.json", "schedule.json", "results.json"):
            if not (run_dir / f).is_file():
                raise Refused(f"{run_dir}: no {f} (a run or evidence directory is needed)")
        if not args.kafka:
            raise Refused("--run needs --kafka")
        if args.venv_package:
            raise Refused("--venv-package goes with --command; --run takes --confluent-kafka")
        config = json.loads((run_dir / "config.json").read_text())
        client = args.client or config.get("producer", {}).get("client", "librdkafka")
        if args.confluent_kafka and client != "librdkafka":
            raise Refused(f"--confluent-kafka needs the librdkafka client; this run's is {client}")
        kafkas = versions_arg(args.kafka)
        clients = versions_arg(args.confluent_kafka) if args.confluent_kafka else [None]
        grid = []
        for k in kafkas:
            for c in clients:
                axes = {"kafka": k} | ({"confluent-kafka": c} if c else {})
                label = f"kafka {k}" + (f", confluent-kafka {c}" if c else f", {client}")
                grid.append(Cell(label, axes))
        recipe = {"kind": "run", "run": str(run_dir), "client": client}
        out = args.out or default_out(run_dir.name)
        one_run = harness_runner(
            run_dir, client, args.cluster_name, args.store or out / "runs", out, args.timeout
        )
    out.mkdir(parents=True, exist_ok=True)
    from kafka_chaos.engine import shared_engine

    try:
        # --run: every cell's check on one warm Spark, in whatever interpreter the cell runs
        with shared_engine() if args.run else contextlib.nullcontext():
            cells = run_grid(out, recipe, grid, args.runs, one_run, args.give_up)
    except KeyboardInterrupt:
        print(f"\nstopped; finished runs are in {out / RECORD}: the same command resumes")
        return 130
    finally:
        if args.run:
            from kafka_chaos.harness.backends import destroy_cluster

            destroy_cluster(args.cluster_name)
    print()
    print_table(out, cells, recipe)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Refused as e:
        print(f"versions: {e}", file=sys.stderr)
        sys.exit(2)
