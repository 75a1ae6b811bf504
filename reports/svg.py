"""Inline SVG plots generated in Python, so a report needs no JS and no network.

Every element goes through :func:`tag`, which escapes attribute values and
text children; only the ``Markup`` it returns itself is trusted.  That keeps
Kafka data (node names, fault names, values) inert inside the SVG too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup, escape

PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#b07aa1",
    "#76b7b2",
    "#edc948",
    "#9c755f",
    "#ff9da7",
    "#bab0ac",
)
FAULT_FILL = "#e15759"
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 56, 12, 34, 30


def tag(name: str, attrs: dict[str, Any] | None = None, *children: Any) -> Markup:
    """One SVG element; attribute values and plain-text children are escaped."""
    parts = [f"<{name}"]
    for key, value in (attrs or {}).items():
        if value is None:
            continue
        if isinstance(value, float):
            value = _num(value)
        parts.append(f' {key}="{escape(str(value))}"')
    if not children:
        return Markup("".join(parts) + "/>")
    inner = "".join(str(escape(c)) for c in children if c is not None)
    return Markup("".join(parts) + ">" + inner + f"</{name}>")


def _num(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".") if x == x else "0"


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi] (1/2/2.5/5 steps), for readable axes."""
    if hi - lo <= 1e-9 * max(1.0, abs(lo), abs(hi)):  # empty or too thin to divide (subnormal)
        hi = lo + 1
    raw = (hi - lo) / max(count, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    digits = max(0, 1 - math.floor(math.log10(step)))  # enough to show 2.5-steps exactly
    first = math.floor(lo / step)
    last = math.ceil(hi / step - 1e-9)  # end on the first tick at or above hi
    return [round(k * step, digits) for k in range(first, max(last, first + 1) + 1)]


def fmt_tick(v: float) -> str:
    if abs(v) >= 1e6:
        return f"{v / 1e6:g}M"
    if abs(v) >= 1e4:
        return f"{v / 1e3:g}k"
    return f"{v:g}"


@dataclass
class Band:
    """A shaded time window (a fault) with a short label and a hover title."""

    start: float
    end: float
    label: str
    title: str


@dataclass
class Frame:
    """Maps data coordinates to pixels inside the plot area."""

    width: int
    height: int
    x0: float
    x1: float
    y0: float = 0.0
    y1: float = 1.0

    @property
    def plot_w(self) -> float:
        return self.width - MARGIN_LEFT - MARGIN_RIGHT

    @property
    def plot_h(self) -> float:
        return self.height - MARGIN_TOP - MARGIN_BOTTOM

    def x(self, v: float) -> float:
        span = (self.x1 - self.x0) or 1.0
        return MARGIN_LEFT + (v - self.x0) / span * self.plot_w

    def y(self, v: float) -> float:
        span = (self.y1 - self.y0) or 1.0
        return MARGIN_TOP + self.plot_h - (v - self.y0) / span * self.plot_h


def _svg(frame: Frame, label: str, body: Iterable[Markup]) -> Markup:
    return tag(
        "svg",
        {
            "xmlns": "http://www.w3.org/2000/svg",
            "viewBox": f"0 0 {frame.width} {frame.height}",
            "width": "100%",
            "role": "img",
            "aria-label": label,
            "class": "chart",
        },
        tag("title", None, label),
        *body,
    )


def _x_axis(frame: Frame, unit: str = "s") -> list[Markup]:
    base = frame.height - MARGIN_BOTTOM
    out = [
        tag(
            "line",
            {
                "x1": MARGIN_LEFT,
                "x2": frame.width - MARGIN_RIGHT,
                "y1": base,
                "y2": base,
                "class": "axis",
            },
        )
    ]
    for t in nice_ticks(frame.x0, frame.x1, 8):
        if t < frame.x0 or t > frame.x1:
            continue
        x = frame.x(t)
        out.append(tag("line", {"x1": x, "x2": x, "y1": base, "y2": base + 4, "class": "axis"}))
        out.append(
            tag(
                "text",
                {"x": x, "y": base + 16, "class": "tick", "text-anchor": "middle"},
                f"{fmt_tick(t)}{unit}",
            )
        )
    return out


def _y_axis(frame: Frame) -> list[Markup]:
    out = []
    for v in nice_ticks(frame.y0, frame.y1, 4):
        if v > frame.y1 + 1e-9:
            continue
        y = frame.y(v)
        out.append(
            tag(
                "line",
                {
                    "x1": MARGIN_LEFT,
                    "x2": frame.width - MARGIN_RIGHT,
                    "y1": y,
                    "y2": y,
                    "class": "grid",
                },
            )
        )
        out.append(
            tag(
                "text",
                {"x": MARGIN_LEFT - 6, "y": y + 4, "class": "tick", "text-anchor": "end"},
                fmt_tick(v),
            )
        )
    return out


def _bands(frame: Frame, bands: Sequence[Band]) -> list[Markup]:
    out = []
    for i, b in enumerate(bands):
        x0 = frame.x(max(b.start, frame.x0))
        x1 = frame.x(min(b.end, frame.x1))
        out.append(
            tag(
                "rect",
                {
                    "x": x0,
                    "y": MARGIN_TOP,
                    "width": max(x1 - x0, 1.5),
                    "height": frame.plot_h,
                    "class": "fault",
                },
                tag("title", None, b.title),
            )
        )
        # stagger labels over two lines so adjacent faults stay readable
        out.append(
            tag(
                "text",
                {"x": x0 + 2, "y": MARGIN_TOP - 12 + 10 * (i % 2), "class": "fault-label"},
                b.label,
            )
        )
    return out


def line_chart(
    xs: Sequence[float],
    series: Sequence[tuple[str, Sequence[float | None], str]],
    *,
    title: str,
    bands: Sequence[Band] = (),
    width: int = 960,
    height: int = 240,
    x_range: tuple[float, float] | None = None,
) -> Markup:
    """Several series over time; ``None`` values break a line (no data there)."""
    lo, hi = x_range or ((min(xs), max(xs)) if xs else (0.0, 1.0))
    ymax = max((v for _, vals, _ in series for v in vals if v is not None), default=0.0)
    frame = Frame(width, height, lo, max(hi, lo + 1), 0.0, nice_ticks(0, max(ymax, 1))[-1])
    body: list[Markup] = [*_bands(frame, bands), *_y_axis(frame), *_x_axis(frame)]
    for i, (label, vals, color) in enumerate(series):
        for run in _runs(xs, vals):
            pts = " ".join(f"{_num(frame.x(x))},{_num(frame.y(v))}" for x, v in run)
            if len(run) == 1:
                x, v = run[0]
                body.append(
                    tag("circle", {"cx": frame.x(x), "cy": frame.y(v), "r": 1.5, "fill": color})
                )
            else:
                body.append(
                    tag(
                        "polyline",
                        {"points": pts, "fill": "none", "stroke": color, "stroke-width": 1.5},
                    )
                )
        # legend in the top margin, right-aligned, clear of the data and fault labels
        lx = width - MARGIN_RIGHT - (len(series) - i) * 110
        body.append(tag("rect", {"x": lx, "y": 3, "width": 10, "height": 10, "fill": color}))
        body.append(tag("text", {"x": lx + 14, "y": 12, "class": "legend"}, label))
    return _svg(frame, title, body)


def _runs(xs: Sequence[float], vals: Sequence[float | None]) -> Iterable[list[tuple[float, float]]]:
    run: list[tuple[float, float]] = []
    for x, v in zip(xs, vals, strict=False):
        if v is None:
            if run:
                yield run
            run = []
        else:
            run.append((x, v))
    if run:
        yield run


def bar_chart(
    labels: Sequence[str],
    counts: Sequence[float],
    *,
    title: str,
    width: int = 960,
    height: int = 200,
    color: str = PALETTE[0],
) -> Markup:
    """Vertical bars with a label under each (histograms, per-run counts)."""
    n = max(len(counts), 1)
    frame = Frame(width, height, 0, n, 0, nice_ticks(0, max([*counts, 1]))[-1])
    body: list[Markup] = [*_y_axis(frame)]
    slot = frame.plot_w / n
    every = max(1, math.ceil(n / 16))  # thin out labels that would overlap
    for i, (label, c) in enumerate(zip(labels, counts, strict=True)):
        x = frame.x(i) + slot * 0.1
        y = frame.y(c)
        body.append(
            tag(
                "rect",
                {"x": x, "y": y, "width": slot * 0.8, "height": frame.y(0) - y, "fill": color},
                tag("title", None, f"{label}: {fmt_tick(c)}"),
            )
        )
        if i % every == 0:
            body.append(
                tag(
                    "text",
                    {
                        "x": x + slot * 0.4,
                        "y": height - MARGIN_BOTTOM + 16,
                        "class": "tick",
                        "text-anchor": "middle",
                    },
                    label,
                )
            )
    return _svg(frame, title, body)


@dataclass
class Segment:
    """One stretch of a partition's leadership: leader and ISR constant."""

    start: float
    end: float
    leader: int | None
    isr: Sequence[int]
    replicas: Sequence[int]

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)


def leader_color(leader: int | None) -> str:
    if leader is None or leader < 0:
        return "#555555"
    return PALETTE[leader % len(PALETTE)]


@dataclass(frozen=True)
class Mark:
    """A moment on one row of the partition timeline, e.g. a broker truncating its log."""

    row: str  # the row's label
    t: float  # seconds on the timeline's axis
    tip: str


def partition_timeline(
    rows: Sequence[tuple[str, Sequence[Segment]]],
    *,
    title: str,
    x_range: tuple[float, float],
    bands: Sequence[Band] = (),
    marks: Sequence[Mark] = (),
    width: int = 960,
) -> Markup:
    """One row per partition, colored by leader; ISR size written in each segment.

    Segments whose ISR is smaller than the replica set get a red underline, and
    a leaderless stretch is dark grey, so under-replication and unavailability
    stand out without reading numbers.  ``marks`` (truncations) are drawn as
    a red triangle over their row's moment, with the event as tooltip.
    """
    row_h = 18
    height = MARGIN_TOP + MARGIN_BOTTOM + row_h * max(len(rows), 1)
    frame = Frame(width, height, x_range[0], max(x_range[1], x_range[0] + 1))
    body: list[Markup] = [*_x_axis(frame)]
    for r, (label, segments) in enumerate(rows):
        y = MARGIN_TOP + r * row_h
        body.append(
            tag(
                "text",
                {"x": MARGIN_LEFT - 6, "y": y + 13, "class": "tick", "text-anchor": "end"},
                label,
            )
        )
        for s in segments:
            x0, x1 = frame.x(s.start), frame.x(s.end)
            w = max(x1 - x0, 1.0)
            leader = "none" if s.leader is None or s.leader < 0 else str(s.leader)
            tip = (
                f"{label} {fmt_tick(s.start)}-{fmt_tick(s.end)}s leader {leader} "
                f"ISR {list(s.isr)} replicas {list(s.replicas)}"
            )
            body.append(
                tag(
                    "rect",
                    {
                        "x": x0,
                        "y": y + 1,
                        "width": w,
                        "height": row_h - 4,
                        "fill": leader_color(s.leader),
                        "class": "seg",
                    },
                    tag("title", None, tip),
                )
            )
            if s.under_replicated:
                body.append(
                    tag(
                        "rect",
                        {"x": x0, "y": y + row_h - 5, "width": w, "height": 3, "class": "urp"},
                    )
                )
            if w > 28:
                body.append(
                    tag(
                        "text",
                        {"x": x0 + 3, "y": y + 12, "class": "seg-label"},
                        f"L{leader} isr{len(s.isr)}",
                    )
                )
    body.extend(_bands(frame, bands))  # over the segments: translucent, so both stay visible
    row_of = {label: r for r, (label, _) in enumerate(rows)}
    for m in marks:
        if m.row not in row_of:
            continue
        x, y = frame.x(m.t), MARGIN_TOP + row_of[m.row] * row_h
        body.append(
            tag(
                "polygon",
                {
                    "points": " ".join(
                        f"{_num(px)},{_num(py)}" for px, py in ((x - 5, y), (x + 5, y), (x, y + 9))
                    ),
                    "class": "truncation",
                    "fill": FAULT_FILL,
                    "stroke": "#000",
                    "stroke-width": 0.5,
                },
                tag("title", None, m.tip),
            )
        )
    return _svg(frame, title, body)


def sparkline(values: Sequence[float], *, title: str, width: int = 160, height: int = 28) -> Markup:
    """A tiny trend line (anomalies per run) for index tables; red dots mark > 0."""
    n = len(values)
    top = max([*values, 1])
    pts = []
    dots = []
    for i, v in enumerate(values):
        x = 4 + (i / max(n - 1, 1)) * (width - 8)
        y = height - 4 - (v / top) * (height - 8)
        pts.append(f"{_num(x)},{_num(y)}")
        color = FAULT_FILL if v > 0 else PALETTE[2]
        dots.append(
            tag(
                "circle",
                {"cx": x, "cy": y, "r": 2.5, "fill": color},
                tag("title", None, f"run {i + 1}: {fmt_tick(v)}"),
            )
        )
    line = (
        tag(
            "polyline",
            {"points": " ".join(pts), "fill": "none", "stroke": "#888", "stroke-width": 1},
        )
        if n > 1
        else Markup("")
    )
    return tag(
        "svg",
        {
            "xmlns": "http://www.w3.org/2000/svg",
            "viewBox": f"0 0 {width} {height}",
            "width": width,
            "height": height,
            "role": "img",
            "aria-label": title,
            "class": "spark",
        },
        tag("title", None, title),
        line,
        *dots,
    )
