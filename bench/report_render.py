"""How long the report takes on a big history, and that reading it streams.

Writes a synthetic 1e6-line history (sends, polls, one fault) into a temp run
directory without results.json, so write_report must aggregate the history
itself, then prints wall time, lines/s and peak RSS growth.

    python bench/report_render.py [LINES]
"""

from __future__ import annotations

import json
import resource
import sys
import tempfile
import time
from pathlib import Path

from kafka_chaos.reports.render import write_report

MS = 1_000_000


def write_history(path: Path, lines: int) -> None:
    with open(path, "w") as fh:
        t = 0
        i = 0
        value = 0
        while i < lines:
            t += 1 * MS
            if i and i % 200_000 == 0:
                phase = "start" if (i // 200_000) % 2 else "end"
                op = {"phase": phase, "id": i // 400_000, "targets": ["n2"]}
                fh.write(
                    json.dumps(
                        {
                            "index": i,
                            "time": t,
                            "process": "nemesis",
                            "type": "info",
                            "f": "kill",
                            "value": op,
                        }
                    )
                    + "\n"
                )
                i += 1
                continue
            send = {"topic": "chaos", "key": "k", "value": value}
            fh.write(
                json.dumps(
                    {
                        "index": i,
                        "time": t,
                        "process": 0,
                        "type": "invoke",
                        "f": "send",
                        "value": send,
                    }
                )
                + "\n"
            )
            fh.write(
                json.dumps(
                    {
                        "index": i + 1,
                        "time": t + 300_000,
                        "process": 0,
                        "type": "ok",
                        "f": "send",
                        "value": {**send, "partition": 0, "offset": value},
                    }
                )
                + "\n"
            )
            i += 2
            value += 1


def main() -> None:
    lines = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp)
        write_history(run / "history.jsonl", lines)
        size = (run / "history.jsonl").stat().st_size
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        start = time.perf_counter()
        page = write_report(run)
        took = time.perf_counter() - start
        rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(f"history: {lines:,} lines, {size / 2**20:.0f} MiB")
        print(
            f"write_report: {took:.2f} s ({lines / took:,.0f} lines/s), "
            f"report {page.stat().st_size / 1024:.0f} KiB"
        )
        print(f"peak RSS growth while rendering: {(rss1 - rss0) / 1024:.1f} MiB")


if __name__ == "__main__":
    main()
