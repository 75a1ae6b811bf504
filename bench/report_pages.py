"""Render the reports of held run directories with one tree's code, to compare two trees.

Does a change keep the report's HTML?  Render with each tree and diff:

    git archive REV | tar -x -C /tmp/before
    PYTHONPATH=/tmp/before:/tmp/before/tests/unit python3 bench/report_pages.py /tmp/pages-before
    PYTHONPATH=.:tests/unit python3 bench/report_pages.py /tmp/pages-after
    diff -r /tmp/pages-before /tmp/pages-after

The run directories: tests/unit/report_fixtures.py's simulated runs (invalid,
valid, unknown, with markup in every field), one whose results.json has every
check of the catalog anomalous (with ranges, and an unknown check), and every
kept run under evidence/.  Each is rendered under four config variants that
switch every report hint on or off.  The time of rendering and the temporary
directory are masked; nothing else differs between two renders of one tree.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

from kafka_chaos.checkers import catalog
from kafka_chaos.reports.render import render_report
from report_fixtures import build_run  # type: ignore[import-not-found]

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
tree = Path(catalog.__file__).resolve().parents[1]
work = Path(tempfile.mkdtemp())

VARIANTS = {
    "base": {},
    "loose": {
        "producer": {"acks": "1", "enable_idempotence": False},
        "topic": {"unclean_leader_election": True, "min_insync_replicas": 1},
        "consumer": {"mode": "subscribe", "commit": "auto"},
        "txn": {"isolation_level": "read_uncommitted", "rewind": False},
    },
    "java": {"producer": {"acks": "0", "client": "java", "enable_idempotence": True}},
    "strict": {
        "producer": {"acks": "all"},
        "topic": {"unclean_leader_election": False, "min_insync_replicas": 2},
        "consumer": {"mode": "assign", "commit": "manual"},
        "txn": {"isolation_level": "read_committed", "rewind": True},
    },
}


def merge(a: dict, b: dict) -> dict:
    a = copy.deepcopy(a)
    for k, v in b.items():
        a[k] = merge(a.get(k) or {}, v) if isinstance(v, dict) else v
    return a


T = "chaos"


def every_check(run: Path) -> None:
    """Every check anomalous, with two adjacent offsets (a range) and one apart."""
    res = json.loads((run / "results.json").read_text())
    checks = {}
    for i, c in enumerate(catalog.every_check()):
        exs = [
            {"topic": "chaos", "partition": i % 3, "offset": 10 + i, "value": i, "indices": [1, 2]},
            {
                "topic": "chaos",
                "partition": i % 3,
                "offset": 11 + i,
                "value": i + 1,
                "indices": [3],
            },
            {"topic": "chaos", "partition": 2, "offset": 99, "value": 7, "indices": [4]},
        ]
        if i % 2:
            exs[0]["now_values"] = [5]
        checks[c.name] = {
            "valid": False,
            "count": 3,
            "severity": "error",
            "explanation": c.explanation,
            "examples": exs,
        }
    checks["not-a-known-check"] = {
        "valid": False,
        "count": 1,
        "explanation": "x",
        "examples": [{"partition": 0, "offset": 1}],
    }
    res["checks"] = checks
    (run / "results.json").write_text(json.dumps(res))


bases: dict[str, Path] = {}
for kind in ("invalid", "valid", "unknown"):
    d = work / f"fixture.{kind}"
    build_run(d, kind)
    bases[d.name] = d
d = work / "fixture.xss"
build_run(d, "invalid", xss=True)
bases[d.name] = d
d = work / "fixture.every"
build_run(d, "invalid")
every_check(d)
bases[d.name] = d
for ev in sorted((tree / "evidence").glob("*/results.json")):
    d = work / f"evidence.{ev.parent.name}"
    shutil.copytree(
        ev.parent, d, ignore=shutil.ignore_patterns("report.html", "repro*", "fix", "shrunk*")
    )
    bases[d.name] = d

stamp = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")
for name, base in bases.items():
    config = json.loads((base / "config.json").read_text())
    for vname, layer in VARIANTS.items():
        (base / "config.json").write_text(json.dumps(merge(config, layer)))
        page = stamp.sub("<stamp>", render_report(base)).replace(str(work), "<work>")
        (out / f"{name}.{vname}.html").write_text(page)
    (base / "config.json").write_text(json.dumps(config))
print(len(list(out.glob("*.html"))), "pages")
