"""The safety report: one self-contained ``report.html`` per run directory.

The page is a view of files already in the run directory (config, results,
history, cluster state, schedule, logs); it never talks to Kafka.  Any input
may be missing — a check that crashed leaves no results.json — and then its
section says "not available" instead of the whole report failing.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from kafka_chaos.checkers import fault_plan
from kafka_chaos.harness.errors import HarnessError
from kafka_chaos.reports import svg
from kafka_chaos.reports.answer import answer
from kafka_chaos.reports.cluster_state import read_cluster_state
from kafka_chaos.reports.coordinators import coordinators_section
from kafka_chaos.reports.disk_faults import disk_faults_section
from kafka_chaos.reports.explanations import explain, hints, promise
from kafka_chaos.reports.grouping import group, mechanism
from kafka_chaos.reports.inputs import Input, as_dict, as_list, load_json
from kafka_chaos.reports.mechanism import mechanism_section
from kafka_chaos.reports.operations import MAX_OPS, load_operations, operations_view
from kafka_chaos.reports.replicas import replicas_section, truncation_marks
from kafka_chaos.reports.shrink_view import shrink_view
from kafka_chaos.reports.templating import environment, show_value
from kafka_chaos.reports.timeline import COUNT_KEYS, fault_bands, finite, run_timeline
from kafka_chaos.workloads import registry
from markupsafe import Markup

STATIC = Path(__file__).parent / "static"
VERDICTS = ("valid", "invalid", "unknown")
SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}  # anomalies are listed worst first
# collected node config may include ssh private keys; a report is shared, so never link them
PRIVATE_KEY = re.compile(r"(^|[_.-])key$|^id_(rsa|dsa|ecdsa|ed25519)$|\.pem$")
MAX_POINTS = 1500  # chart resolution; longer runs are averaged into wider buckets
MAX_INDICES = 30
CONFIG_SECTIONS = ("cluster", "topic", "producer", "consumer", "nemesis", "checker", "versions")
LINKED_FILES = (
    ("history", "history.jsonl"),
    ("results", "results.json"),
    ("config", "config.json"),
    ("fault schedule", "schedule.json"),
    ("cluster state", "cluster-state.jsonl"),
    ("harness log", "harness.log"),
)


class ReportError(HarnessError):
    """A report or index cannot be written (e.g. the run directory does not exist)."""


def stylesheet() -> Markup:
    """Our own CSS file, trusted: escaping would break its quotes and selectors in <style>."""
    return Markup((STATIC / "report.css").read_text(encoding="utf-8"))


# --- verdict and configuration -------------------------------------------------


def verdict_of(results: Input) -> tuple[str, str]:
    if results.data is None:
        return "unknown", f"No checker results: {results.missing}. The check did not complete."
    data = as_dict(results.data)
    v = data.get("verdict")
    if v not in VERDICTS:
        return "unknown", f"results.json has no recognised verdict ({v!r})."
    checks = as_dict(data.get("checks"))

    def named(pred: Any) -> str:
        names = sorted(n for n, c in checks.items() if pred(as_dict(c)))
        return f" ({', '.join(names)})" if names else ""

    if v == "invalid":
        failed = named(lambda c: c.get("valid") is False and c.get("severity", "error") == "error")
        return v, f"At least one anomaly of error severity was found{failed}."
    if v == "unknown":
        undecided = named(lambda c: c.get("valid") == "unknown")
        reasons = [str(r) for r in as_list(data.get("unknown_reasons"))]
        if reasons:
            return v, f"The checkers could not decide{undecided}: {'; '.join(reasons)}."
        return v, f"The checkers could not decide{undecided}: e.g. the final drain did not finish."
    warned = named(lambda c: c.get("count", 0) and c.get("severity") == "warning")
    if warned:
        # Loss that the run's settings allow (acks=1, unclean election) is a warning:
        # valid, but the reader must see it next to the verdict, not only further down.
        return v, (
            "No anomaly of error severity was found; warnings, shapes this run's settings "
            f"allow, were found{warned}."
        )
    return v, "No anomaly of error severity was found."


def expectation(config: dict[str, Any], verdict: str) -> dict[str, Any] | None:
    expected = config.get("expected_verdict")
    if not expected:
        return None
    return {"expected": str(expected), "held": expected == verdict}


def config_sections(config: dict[str, Any]) -> list[tuple[str, list[tuple[str, str]]]]:
    top = [(k, show_value(v)) for k, v in sorted(config.items()) if not isinstance(v, dict)]
    out = [("test", top)]
    for name in CONFIG_SECTIONS:
        section = config.get(name)
        if isinstance(section, dict):
            out.append((name, [(k, show_value(v)) for k, v in sorted(section.items())]))
    return out


def headline(config: dict[str, Any]) -> dict[str, Any]:
    """The handful of settings a reader needs first, for the banner and the index."""
    cluster, topic = as_dict(config.get("cluster")), as_dict(config.get("topic"))
    producer, nemesis = as_dict(config.get("producer")), as_dict(config.get("nemesis"))
    versions = as_dict(config.get("versions"))
    return {
        "name": config.get("scenario") or config.get("name") or "?",
        "kafka": versions.get("kafka") or cluster.get("kafka_version") or "?",
        "mode": cluster.get("mode") or "?",
        "backend": cluster.get("backend") or "?",
        "nodes": cluster.get("nodes") or "?",
        "faults": ", ".join(map(str, as_list(nemesis.get("faults")))) or "none",
        "acks": producer.get("acks", "?"),
        "rf": topic.get("replication_factor", "?"),
        "min_isr": topic.get("min_insync_replicas", "?"),
        "seed": config.get("seed", "?"),
        "started_at": config.get("started_at"),
        "consumers": consumers(config),
        "client": client(config),
    }


def client(config: dict[str, Any]) -> str:
    """Whose client ran, with its version: the column that says whose bug a finding is.

    A transactional run adds the cluster's finalized ``transaction.version``:
    the Java client speaks KIP-890 part 2 at 2, librdkafka never does.
    """
    versions = as_dict(config.get("versions"))
    names = {
        "librdkafka": f"librdkafka {versions.get('librdkafka', '?')}",
        "java": f"Java {versions.get('kafka_clients', '?')}",
    }
    roles = [
        as_dict(config.get("producer")).get("client") or "librdkafka",
        as_dict(config.get("consumer")).get("client") or "librdkafka",
    ]
    if roles[0] == roles[1]:
        text = names.get(roles[0], roles[0])
    else:
        text = (
            f"{names.get(roles[0], roles[0])} producers, {names.get(roles[1], roles[1])} consumers"
        )
    # recorded only for a workload that declares records_features (workloads/registry.py)
    tv = as_dict(config.get("cluster_features")).get("transaction.version")
    if tv is not None:
        text += f"; transaction.version {tv}"
    return text


def consumers(config: dict[str, Any]) -> str:
    """How the run consumed, in a few words: the cell of a version/protocol matrix."""
    consumer = as_dict(config.get("consumer"))
    mode = consumer.get("mode") or "?"
    declared = registry.find(config.get("workload"))
    if declared is not None and declared.consumers is not None:
        return declared.consumers(config)
    if mode == "share":
        return "share groups (KIP-932)"
    if mode == "subscribe":
        protocol = consumer.get("group_protocol") or "classic"
        return "consumer protocol (KIP-848)" if protocol == "consumer" else "classic groups"
    return f"{mode} (no group)" if mode == "assign" else str(mode)


def workload_sections(
    run_dir: Path, config: dict[str, Any], results: dict[str, Any]
) -> list[dict[str, Any]]:
    """The report sections the run's workload declares (workloads/registry.py),
    those with something to show for this run; each body is the workload's HTML."""
    declared = registry.find(config.get("workload"))
    sections = declared.report_sections if declared is not None else ()
    shown = ((s, s.body(run_dir, config, results)) for s in sections)
    return [{"id": s.id, "title": s.title, "html": Markup(body)} for s, body in shown if body]


# --- timeline --------------------------------------------------------------------


def dense_timeline(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Fill missing seconds, then average into wider buckets for long runs."""
    by_t: dict[int, dict[str, Any]] = {}
    for r in rows:
        if isinstance(r, dict) and isinstance(r.get("t"), (int, float)):
            by_t[int(r["t"])] = r
    if not by_t:
        return []
    lo, hi = min(by_t), max(by_t)
    width = max(1, math.ceil((hi - lo + 1) / MAX_POINTS))
    out = []
    for start in range(lo, hi + 1, width):
        chunk = [by_t.get(t, {}) for t in range(start, min(start + width, hi + 1))]
        row: dict[str, Any] = {"t": start}
        for key in COUNT_KEYS:
            row[key] = sum(finite(c.get(key)) or 0.0 for c in chunk) / len(chunk)
        for key, combine in (("lat_p50_ms", _mean), ("lat_p99_ms", max), ("lat_max_ms", max)):
            vals = [v for c in chunk if (v := finite(c.get(key))) is not None]
            row[key] = combine(vals) if vals else None
        out.append(row)
    return out


def _mean(vals: list[float]) -> float:
    return sum(vals) / len(vals)


def timeline_section(run_dir: Path, results: dict[str, Any]) -> dict[str, Any]:
    """Prefer the checkers' per-second timeline; otherwise stream the history."""
    found = run_timeline(run_dir, results)
    rows, faults = found.rows, found.faults
    dense = dense_timeline(rows)
    section: dict[str, Any] = {
        "source": found.source,
        "problem": found.problem,
        "ops": found.ops,
        "faults": faults,
        "availability": found.availability,
    }
    if not dense:
        section["missing"] = "no timeline: results.json has none and history.jsonl is absent"
        section["end_s"] = max([finite(f.get("end_s")) or 0.0 for f in faults], default=0.0)
        return section
    xs = [r["t"] for r in dense]
    end = xs[-1] + 1
    x_range = (0.0, float(max([end, *[finite(f.get("end_s")) or 0.0 for f in faults]])))
    bands = fault_bands(faults)
    section["end_s"] = x_range[1]
    section["throughput_svg"] = svg.line_chart(
        xs,
        [
            ("acked", [r["acked"] for r in dense], svg.PALETTE[2]),
            ("failed", [r["failed"] for r in dense], svg.FAULT_FILL),
            ("indeterminate", [r["info"] for r in dense], svg.PALETTE[1]),
            ("polled", [r["polled"] for r in dense], svg.PALETTE[0]),
        ],
        title="operations per second",
        bands=bands,
        x_range=x_range,
    )
    section["latency_svg"] = svg.line_chart(
        xs,
        [
            ("p50", [r["lat_p50_ms"] for r in dense], svg.PALETTE[0]),
            ("p99", [r["lat_p99_ms"] for r in dense], svg.PALETTE[1]),
            ("max", [r["lat_max_ms"] for r in dense], svg.PALETTE[3]),
        ],
        title="send latency (ms, invoke to ack)",
        bands=bands,
        x_range=x_range,
    )
    return section


def partitions_section(
    run_dir: Path,
    faults: Sequence[dict[str, Any]],
    end_s: float,
    truncations: Sequence[tuple[int, float, str]] = (),
) -> dict[str, Any]:
    path = run_dir / "cluster-state.jsonl"
    if not path.exists():
        return {"missing": "cluster-state.jsonl not available (no leader/ISR samples)"}
    try:
        state = read_cluster_state(path)
    except OSError as e:
        return {"missing": f"cluster-state.jsonl not available: {e.strerror or e}"}
    if not state.partitions:
        return {
            "missing": f"cluster-state.jsonl has no partition samples "
            f"({state.samples} samples, {state.errors} with errors)",
            "problems": state.problems,
        }
    x_range = (0.0, max(end_s, state.end_s, 1.0))
    one_topic = len({t for t, _ in state.partitions}) == 1
    marks = [svg.Mark(f"p{p}", t, tip) for p, t, tip in truncations if one_topic]
    return {
        "svg": svg.partition_timeline(
            state.rows(),
            title="leader and ISR per partition",
            x_range=x_range,
            bands=fault_bands(faults),
            marks=marks,
        ),
        "truncations": len(marks),
        "state": state,
        "problems": state.problems,
        "leaders": sorted(
            {
                s.leader
                for segs in state.partitions.values()
                for s in segs
                if s.leader is not None and s.leader >= 0
            }
        ),
        "colors": svg.leader_color,
    }


def plan_section(results: dict[str, Any], faults: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Faults that ran off their schedule: results.json's ``faults_off_plan``, or,
    without it, the same summary of the history's faults (``reports.timeline``).

    Results written before the flag existed have neither, and flag nothing.
    """
    plan = as_dict(results.get("faults_off_plan"))
    if not plan:
        plan = fault_plan.summary(faults)
    late = [as_dict(f) for f in as_list(plan.get("faults"))]
    return {
        "count": len(late),
        "faults": late,
        "worst_deviation_s": finite(plan.get("worst_deviation_s")),
        "tolerance_s": finite(plan.get("tolerance_s")) or fault_plan.TOLERANCE_S,
        "unhealed": sum(f.get("healed") is False for f in late),
    }


# --- anomalies ---------------------------------------------------------------------


def checks_section(results: dict[str, Any], config: dict[str, Any]) -> list[dict[str, Any]]:
    checks = []
    for name, check in sorted(as_dict(results.get("checks")).items()):
        check = as_dict(check)
        count = check.get("count") if isinstance(check.get("count"), int) else 0
        exp = explain(name, check.get("explanation"))
        raw = [as_dict(ex) for ex in as_list(check.get("examples"))]
        views = [example_view(name, ex) for ex in raw]
        ranges, rest = group(check, raw, views)
        checks.append(
            {
                "name": name,
                "valid": check.get("valid"),
                "count": count,
                "severity": check.get("severity") or "error",
                "title": exp.title,
                "meaning": exp.meaning,
                "causes": exp.causes,
                "basis": promise(name, check),
                "hints": hints(name, config),
                "examples": views,
                "ranges": ranges,
                "ungrouped": rest,
                "more_ranges": check.get("more_ranges") or 0,
                "mechanism": mechanism(name, raw),
                "one_topic": len({r.topic for r in ranges}) <= 1,
                "anomalous": count > 0 or check.get("valid") is False,
            }
        )
    return checks


def add_operations(run_dir: Path, checks: list[dict[str, Any]], faults: list[dict]) -> None:
    """Each example view gets ``ops``: the history lines it names, read in one pass."""
    views = [v for c in checks if c["anomalous"] for v in c["examples"]]
    wanted = {i for v in views for i in v["indices"][:MAX_OPS]}
    ops = load_operations(run_dir / "history.jsonl", wanted)
    for v in views:
        v["ops"] = operations_view(v["indices"], ops, faults)


def example_view(check: str, ex: Any) -> dict[str, Any]:
    """Split an example into special parts (neighbours, indices) and plain fields."""
    ex = as_dict(ex)
    indices = [i for i in as_list(ex.get("indices")) if isinstance(i, int)]
    view: dict[str, Any] = {
        "fields": [(k, show_value(v)) for k, v in ex.items() if k not in ("indices", "neighbours")],
        "indices": indices[:MAX_INDICES],
        "more_indices": max(0, len(indices) - MAX_INDICES),
    }
    neighbours = as_list(ex.get("neighbours"))
    if neighbours:
        offset = ex.get("offset")
        rows = []
        for n in neighbours:
            n = as_dict(n)
            reads = as_list(n.get("read_values"))
            rows.append(
                {
                    "offset": n.get("offset"),
                    "acked": n.get("acked_value"),
                    "reads": reads,
                    "lost": n.get("offset") == offset,
                    "mismatch": bool(reads) and any(r != n.get("acked_value") for r in reads),
                }
            )
        at_lost = next((r["reads"] for r in rows if r["lost"]), [])
        view["neighbours"] = rows
        view["read_at_offset"] = at_lost
        view["lost"] = {
            k: ex.get(k)
            for k in ("value", "topic", "partition", "offset", "ack_index", "invoke_index")
        }
    return view


def fmt_ms(ms: float) -> str:
    """Short duration labels (250ms, 2s) so 16 histogram buckets fit under their bars."""
    return f"{ms / 1000:g}s" if ms >= 1000 else f"{ms:g}ms"


def bucket_labels(buckets: list[dict[str, Any]]) -> list[str]:
    """``le_ms: null`` is the overflow bucket: label it by the previous bound."""
    labels, previous = [], None
    for b in buckets:
        bound = finite(b.get("le_ms"))
        if bound is None:
            labels.append(f">{fmt_ms(previous)}" if previous is not None else "all")
        else:
            labels.append(f"≤{fmt_ms(bound)}")
            previous = bound
    return labels


def lag_section(results: dict[str, Any]) -> dict[str, Any]:
    lag = as_dict(as_dict(results.get("stats")).get("realtime_lag"))
    if not lag:
        return {"missing": "realtime lag not available (no results.json statistics)"}
    buckets = [as_dict(b) for b in as_list(lag.get("histogram"))]
    out: dict[str, Any] = {"stats": lag, "worst": [as_dict(w) for w in as_list(lag.get("worst"))]}
    if buckets:
        out["svg"] = svg.bar_chart(
            bucket_labels(buckets),
            [finite(b.get("count")) or 0.0 for b in buckets],
            title="realtime lag histogram (reads per bucket)",
        )
    return out


# --- files ---------------------------------------------------------------------------


def href(run_dir: Path, path: Path) -> str:
    return quote(path.relative_to(run_dir).as_posix())


def links_section(run_dir: Path) -> dict[str, Any]:
    files = []
    for label, name in LINKED_FILES:
        path = run_dir / name
        files.append(
            {
                "label": label,
                "name": name,
                "href": quote(name),
                "size": path.stat().st_size if path.is_file() else None,
            }
        )
    logs_dir = run_dir / "logs"
    logs, hidden = [], 0
    if logs_dir.is_dir():
        for root, _dirs, names in os.walk(logs_dir):
            for name in sorted(names):
                path = Path(root) / name
                if PRIVATE_KEY.search(name):
                    hidden += 1
                    continue
                logs.append(
                    {
                        "name": path.relative_to(logs_dir).as_posix(),
                        "href": href(run_dir, path),
                        "size": path.stat().st_size,
                    }
                )
    logs.sort(key=lambda x: x["name"])
    # --client-debug's logs, one per client (docs/debug-logs.md).
    client_dir = run_dir / "client-logs"
    client_logs = [
        {"name": p.name, "href": href(run_dir, p), "size": p.stat().st_size}
        for p in (sorted(client_dir.iterdir()) if client_dir.is_dir() else [])
        if p.is_file()
    ]
    return {"files": files, "logs": logs, "hidden": hidden, "client_logs": client_logs}


def schedule_section(run_dir: Path) -> dict[str, Any]:
    sched = load_json(run_dir / "schedule.json")
    if sched.data is None:
        return {"missing": sched.missing}
    data = as_dict(sched.data)
    return {"seed": data.get("seed"), "ops": [as_dict(o) for o in as_list(data.get("ops"))]}


# --- page ----------------------------------------------------------------------------


def build_context(run_dir: Path) -> dict[str, Any]:
    config_in = load_json(run_dir / "config.json")
    results_in = load_json(run_dir / "results.json")
    config, results = as_dict(config_in.data), as_dict(results_in.data)
    verdict, verdict_reason = verdict_of(results_in)
    timeline = timeline_section(run_dir, results)
    checks = checks_section(results, config)
    add_operations(run_dir, checks, timeline["faults"])
    schedule = schedule_section(run_dir)
    return {
        "run_dir": run_dir.name,
        "run_path": str(run_dir),
        "generated_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "css": stylesheet(),
        "config": config,
        "config_missing": config_in.missing,
        "config_sections": config_sections(config) if config else [],
        "head": headline(config),
        "results": results,
        "results_missing": results_in.missing,
        "verdict": verdict,
        "verdict_reason": verdict_reason,
        "expectation": expectation(config, verdict),
        "timeline": timeline,
        "plan": plan_section(results, timeline["faults"]),
        "partitions": partitions_section(
            run_dir, timeline["faults"], timeline["end_s"], truncation_marks(run_dir)
        ),
        "replicas": replicas_section(run_dir),
        "disk_faults": disk_faults_section(run_dir),
        "coordinators": coordinators_section(run_dir),
        "workload_sections": workload_sections(run_dir, config, results),
        "answer": answer(results),
        "checks": checks,
        "anomalies": sorted(
            (c for c in checks if c["anomalous"]),
            key=lambda c: (SEVERITY_ORDER.get(c["severity"], 3), c["name"]),
        ),
        "lag": lag_section(results),
        "links": links_section(run_dir),
        "shrink": shrink_view(run_dir),
        "schedule": schedule,
        "mechanism": mechanism_section(
            run_dir, config.get("topic_name_used"), schedule.get("ops", [])
        ),
    }


def render_report(run_dir: Path) -> str:
    return environment().get_template("report.j2").render(**build_context(run_dir))


def write_atomic(path: Path, text: str) -> None:
    """Readers (a browser, CI artifact upload) never see a half-written page."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def write_report(run_dir: Path) -> Path:
    """Render ``run_dir/report.html`` from whatever inputs the run left; return its path."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ReportError(f"{run_dir}: not a run directory (no such directory)")
    out = run_dir / "report.html"
    write_atomic(out, render_report(run_dir))
    return out
