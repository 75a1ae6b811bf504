"""bench/versions.py: the table, the Fisher marks, the record a grid resumes from.

The marks decide what an upstream report may claim as "affects versions", so
the tests pin the cases where a naive reading goes wrong: a difference that
looks total (3 of 3 against 0 of 3) but that so few runs cannot show, a cell
that never ran sitting between two that did, and a grid stopped half-way
whose finished runs must be neither repeated nor lost.  The end-to-end tests
run the command itself on a small shell reproducer (no cluster).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import bench.versions as versions
from bench.versions import (
    ANOMALY,
    COULD_NOT_RUN,
    NONE,
    Cell,
    Refused,
    adjacent_pairs,
    check_recipe,
    command_argv,
    command_env,
    command_runner,
    load_record,
    outcome_of_exit,
    package_arg,
    rate_cell,
    readings,
    run_grid,
    still_to_run,
    table_lines,
    tally,
)

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "versions.py"


def cell(label: str, hits: int, runs: int, failed: int = 0, **axes: str) -> Cell:
    return Cell(label, axes or {"version": label}, runs=runs, hits=hits, failed=failed)


def test_exit_codes_map_to_outcomes() -> None:
    assert outcome_of_exit(1) == ANOMALY
    assert outcome_of_exit(0) == NONE
    # 2 is the reproducers' "could not run"; a crash, a missing program or a signal
    # gave no verdict either and must not count as "none".
    for code in (2, 3, 127, 130, -9):
        assert outcome_of_exit(code) == COULD_NOT_RUN


def test_rates_carry_wilson_intervals() -> None:
    assert rate_cell(0, 3) == "0% (0-56%)"
    assert rate_cell(3, 3) == "100% (44-100%)"
    assert rate_cell(5, 10) == "50% (24-76%)"
    assert rate_cell(0, 0) == "-"


def test_a_significant_rise_marks_last_good_and_first_bad() -> None:
    cells = [cell("4.0.2", 0, 10), cell("4.1.2", 0, 10), cell("4.2.1", 10, 10)]
    lines, marks = readings(cells)
    assert marks == {"4.1.2": ["last good (version)"], "4.2.1": ["first bad (version)"]}
    assert "the same rate, no mark" in lines[0]
    assert "< 0.05: last good 4.1.2, first bad 4.2.1" in lines[1]


def test_a_significant_fall_marks_last_bad_and_first_good() -> None:
    _, marks = readings([cell("a.1", 5, 5), cell("b.1", 0, 5)])
    assert marks == {"a.1": ["last bad (version)"], "b.1": ["first good (version)"]}


def test_too_few_runs_are_said_to_be_too_few_and_not_marked() -> None:
    # 3 of 3 against 0 of 3 looks total, but its two-sided Fisher p is 0.1.
    lines, marks = readings([cell("3.9.2", 0, 3), cell("4.0.2", 3, 3)])
    assert marks == {}
    assert lines == [
        "version: 3.9.2 0/3 vs 4.0.2 3/3: Fisher p = 0.1: not a significant difference, "
        "no mark; with 3 and 3 runs no difference can reach p < 0.05 "
        "(smallest possible p = 0.1)"
    ]
    # With enough runs the same kind of line carries no such excuse.
    (line,), _ = readings([cell("x.1", 3, 10), cell("x.2", 6, 10)])
    assert line.endswith("not a significant difference, no mark")


def test_cells_that_never_ran_are_skipped_between_neighbours() -> None:
    cells = [cell("4.2.1", 3, 3), cell("4.2.2", 0, 0, failed=2), cell("4.3.1", 3, 3)]
    pairs = adjacent_pairs(cells)
    assert [(a.label, b.label) for _, a, b in pairs] == [("4.2.1", "4.3.1")]
    text = "\n".join(table_lines(cells))
    assert "| 4.2.2 | 0 | 0 | - | 2 |  |" in text


def test_two_axes_compare_along_each_with_the_other_held() -> None:
    grid = [
        Cell(f"k{k} c{c}", {"kafka": f"{k}.0", "confluent-kafka": f"2.{c}"}, runs=5, hits=h)
        for (k, c, h) in ((3, 1, 0), (3, 2, 0), (4, 1, 0), (4, 2, 5))
    ]
    pairs = {(axis, a.label, b.label) for axis, a, b in adjacent_pairs(grid)}
    assert pairs == {
        ("kafka", "k3 c1", "k4 c1"),
        ("kafka", "k3 c2", "k4 c2"),
        ("confluent-kafka", "k3 c1", "k3 c2"),
        ("confluent-kafka", "k4 c1", "k4 c2"),
    }
    _, marks = readings(grid)
    assert marks["k4 c2"] == ["first bad (kafka)", "first bad (confluent-kafka)"]


def write_record(path: Path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines))


def entry(cell_label: str, outcome: str, recipe: dict | None = None) -> str:
    return json.dumps(
        {
            "recipe": recipe or {"kind": "command", "command": "r {version}"},
            "cell": cell_label,
            "axes": {"version": cell_label},
            "outcome": outcome,
        }
    )


def test_a_torn_last_line_is_dropped_and_a_bad_middle_line_refused(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"
    record.write_text(entry("1.0", ANOMALY) + "\n" + '{"recipe": {"ki')  # killed mid-write
    assert [e["outcome"] for e in load_record(record)] == [ANOMALY]
    write_record(record, [entry("1.0", ANOMALY), "not json", entry("1.0", NONE)])
    with pytest.raises(Refused, match="line 2 is not JSON"):
        load_record(record)


def test_resume_runs_only_what_the_record_lacks(tmp_path: Path) -> None:
    """A partial record (cell 1.0 has 2 of 3 verdicts and a failure, cell 2.0 none):
    only 1 + 3 runs are made, and the table counts the recorded runs too."""
    record = tmp_path / "record.jsonl"
    write_record(record, [entry("1.0", NONE), entry("1.0", COULD_NOT_RUN), entry("1.0", ANOMALY)])
    entries = load_record(record)
    assert still_to_run(entries, "1.0", 3) == 1
    assert still_to_run(entries, "2.0", 3) == 3
    calls = tmp_path / "calls"
    script = tmp_path / "repro"
    # exits 1 (the anomaly) on 2.0 and 0 on 1.0, noting each call
    script.write_text(f'#!/bin/sh\necho "$1" >> {calls}\n[ "$1" != 2.0 ]\n')
    script.chmod(0o755)
    grid = [Cell("1.0", {"version": "1.0"}), Cell("2.0", {"version": "2.0"})]
    recipe = {"kind": "command", "command": "r {version}"}
    cells = run_grid(tmp_path, recipe, grid, 3, command_runner(f"{script} {{version}}", 30), 2)
    assert calls.read_text().split() == ["1.0", "2.0", "2.0", "2.0"]
    by = {c.label: (c.runs, c.hits, c.failed) for c in cells}
    assert by == {"1.0": (3, 1, 1), "2.0": (3, 3, 0)}
    assert len(load_record(record)) == 7  # every run recorded, in the one file
    # A second pass has nothing left to do.
    run_grid(tmp_path, recipe, grid, 3, command_runner(f"{script} {{version}}", 30), 2)
    assert len(calls.read_text().split()) == 4


def test_a_record_of_another_recipe_is_refused(tmp_path: Path) -> None:
    other = {"kind": "command", "command": "other {version}"}
    with pytest.raises(Refused, match="another recipe"):
        check_recipe([json.loads(entry("1.0", NONE, other))], {"kind": "command"}, tmp_path)


def test_tally_keeps_grid_order_and_adds_unknown_cells(tmp_path: Path) -> None:
    entries = [json.loads(entry(v, NONE)) for v in ("9.0", "1.0")]
    cells = tally(entries, [Cell("1.0", {"version": "1.0"}), Cell("5.0", {"version": "5.0"})])
    assert [c.label for c in cells] == ["1.0", "5.0", "9.0"]


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_the_command_end_to_end_on_a_small_reproducer(tmp_path: Path) -> None:
    """A reproducer that shows the anomaly from 2.0 on and cannot run on 1.5."""
    script = tmp_path / "repro.sh"
    script.write_text(
        '#!/bin/sh\ncase "$1" in 1.0) echo in order; exit 0;; 1.5) echo no jar; exit 2;; '
        "*) echo OUT OF ORDER; exit 1;; esac\n"
    )
    script.chmod(0o755)
    out = tmp_path / "grid"
    args = ["--command", f"{script} {{version}}", "--versions", "1.0,1.5,2.0", "--out", str(out)]
    got = run_cli(*args, "--runs", "5", cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    assert "| 1.0 | 5 | 0 | 0% (0-43%) | 0 | last good (version) |" in got.stdout
    assert "| 1.5 | 0 | 0 | - | 2 |  |" in got.stdout
    assert "| 2.0 | 5 | 5 | 100% (57-100%) | 0 | first bad (version) |" in got.stdout
    assert "version: 1.0 0/5 vs 2.0 5/5: Fisher p = 0.0079 < 0.05: last good 1.0, first bad 2.0" \
        in got.stdout  # fmt: skip
    lines = (out / "record.jsonl").read_text().splitlines()
    assert len(lines) == 12  # 5 + 2 failures + 5
    first = json.loads(lines[0])
    assert (first["outcome"], first["exit"], first["detail"]) == (NONE, 0, "in order")
    assert (out / first["log"]).read_text() == "in order\n"
    # --table rebuilds the same table from the record alone.
    table = run_cli("--table", str(out), cwd=tmp_path)
    assert table.returncode == 0
    assert table.stdout.strip() == (out / "table.md").read_text().strip()
    # More runs per cell later: only the missing ones are made.
    more = run_cli(*args, "--runs", "6", cwd=tmp_path)
    assert more.returncode == 0, more.stderr
    assert len((out / "record.jsonl").read_text().splitlines()) == 12 + 1 + 2 + 1
    assert "| 2.0 | 6 | 6 |" in more.stdout


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    for args in (
        ["--command", "x", "--versions", "1.0"],
        ["--command", "x {version}", "--versions", "1.0,;rm"],
        ["--table", str(tmp_path / "none")],
        ["--run", str(tmp_path), "--kafka", "4.4.0"],
    ):
        got = run_cli(*args, cwd=tmp_path)
        assert got.returncode == 2
        assert got.stderr.startswith("versions: ") and got.stderr.count("\n") == 1, got.stderr


# ---- --venv-package: one client per version, never over the released one


def test_python_and_version_are_substituted_and_the_path_stays_one_word() -> None:
    python = Path("/cache dir/venvs/confluent-kafka-2.6.1/bin/python")
    argv = command_argv("env PYTHON={python} repro/run --out o/{version} -v {version}",
                        "2.6.1", python)  # fmt: skip
    assert argv == ["env", f"PYTHON={python}", "repro/run", "--out", "o/2.6.1", "-v", "2.6.1"]
    assert command_argv("{python} r.py", "1.0", python)[0] == str(python)


def test_the_venvs_bin_directory_comes_first_on_path() -> None:
    env = command_env(Path("/v/bin/python"))
    assert env["PATH"].split(":")[0] == "/v/bin"
    assert env["PATH"].split(":")[1:] != []  # the rest of PATH is kept, not replaced


def test_bad_package_names_are_refused() -> None:
    assert package_arg("confluent-kafka") == "confluent-kafka"
    assert package_arg("kafka_python") == "kafka_python"
    # a pinned or marked requirement, a path, an option: the grid pins the version itself
    for bad in ("confluent-kafka==2.6.1", "x; sys_platform=='linux'", "../x", "-e", "", "a b"):
        with pytest.raises(Refused, match="not a package name"):
            package_arg(bad)
    with pytest.raises(Refused, match="not a package name"):
        versions.venv_python("2.6.1", "confluent-kafka>=2")  # refused before any venv is made


def fake_venv(tmp_path: Path, broken: set[str]) -> tuple[object, Path]:
    """venv_python's stand-in: per version a bin directory whose python and python3
    say which venv they are, or the one-line refusal of a wheel that will not install."""
    made: list[tuple[str, str]] = []

    def venv_python(version: str, package: str = "confluent-kafka") -> Path:
        made.append((version, package))
        if version in broken:
            raise Refused(f"{package} {version}: install {package}=={version} failed: no wheel")
        bindir = tmp_path / f"{package}-{version}" / "bin"
        bindir.mkdir(parents=True, exist_ok=True)
        for name in ("python", "python3"):
            exe = bindir / name
            exe.write_text(f'#!/bin/sh\necho "{name} of {version}"; exit 1\n')
            exe.chmod(0o755)
        return bindir / "python"

    venv_python.made = made  # type: ignore[attr-defined]
    return venv_python, tmp_path


def test_each_version_runs_in_its_venv_and_a_bad_wheel_could_not_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stand_in, _ = fake_venv(tmp_path / "venvs", broken={"2.0"})
    monkeypatch.setattr(versions, "venv_python", stand_in)
    out = tmp_path / "grid"
    # {python} for one call, plain python3 (found through PATH) for the other
    command = "sh -c '{python}; python3' {version}"
    got = versions.main(["--command", command, "--versions", "1.0,2.0", "--runs", "2",
                         "--venv-package", "confluent-kafka", "--out", str(out)])  # fmt: skip
    assert got == 0
    entries = load_record(out / "record.jsonl")
    assert {json.dumps(e["recipe"], sort_keys=True) for e in entries} == {json.dumps(
        {"command": command, "kind": "command", "venv_package": "confluent-kafka"},
        sort_keys=True)}  # fmt: skip
    ran = [e for e in entries if e["cell"] == "1.0"]
    assert [e["outcome"] for e in ran] == [ANOMALY, ANOMALY]
    assert (out / ran[0]["log"]).read_text() == "python of 1.0\npython3 of 1.0\n"
    broken = [e for e in entries if e["cell"] == "2.0"]
    assert [e["outcome"] for e in broken] == [COULD_NOT_RUN, COULD_NOT_RUN]  # give-up 2
    assert broken[0]["detail"] == (
        "confluent-kafka 2.0: install confluent-kafka==2.0 failed: no wheel"
    )
    assert "\n" not in broken[0]["detail"]
    assert ("1.0", "confluent-kafka") in stand_in.made  # type: ignore[attr-defined]
    # The same record without --venv-package is another recipe: refused, not mixed.
    with pytest.raises(Refused, match="another recipe"):
        versions.main(["--command", command, "--versions", "1.0", "--out", str(out)])


def test_venv_package_is_refused_where_it_does_not_belong(tmp_path: Path) -> None:
    for args in (
        ["--command", "x {version}", "--versions", "1.0", "--venv-package", "ck==1.0"],
        ["--command", "x {version}", "--versions", "1.0", "--venv-package", "../up"],
    ):
        got = run_cli(*args, cwd=tmp_path)
        assert got.returncode == 2
        assert got.stderr.startswith("versions: ") and got.stderr.count("\n") == 1, got.stderr
        assert "not a package name" in got.stderr
    (tmp_path / "r").mkdir()
    for f in ("config.json", "schedule.json", "results.json"):
        (tmp_path / "r" / f).write_text("{}")
    got = run_cli("--run", str(tmp_path / "r"), "--kafka", "4.4.0", "--venv-package", "ck",
                  cwd=tmp_path)  # fmt: skip
    assert got.returncode == 2 and "goes with --command" in got.stderr, got.stderr
