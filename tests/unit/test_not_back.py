"""What the bench keeps of a broker that did not come back, read from a real broker log.

The excerpt is n2's server.log from the run where its log directory went
offline on a torn leader-epoch-checkpoint (evidence/power-loss-torn-...).
"""

from __future__ import annotations

from pathlib import Path

from kafka_chaos.not_back import named_files, trouble_lines

EXCERPT = (
    Path(__file__).resolve().parents[2]
    / "evidence/power-loss-torn-leader-epoch-checkpoint-4.4.0/n2-server-log-excerpt.log"
)


def test_the_error_its_stack_trace_and_the_shutdown_are_kept_and_nothing_else() -> None:
    lines = EXCERPT.read_text().splitlines()
    kept = trouble_lines(lines)
    assert kept[0].endswith("leader-epoch-checkpoint (org.apache.kafka.storage.internals.log."
                            "LogDirFailureChannel)")  # fmt: skip
    assert kept[1].startswith("java.io.IOException: Expected [1] entries in checkpoint file")
    trace = [k.strip() for k in kept if k.startswith("\t")]
    assert trace and trace[0].startswith("at org.apache.kafka.server.common.CheckpointFile")
    assert any("Stopping serving logs in dir" in k for k in kept)
    assert any("Shutdown broker because all log dirs" in k for k in kept)
    assert not any("Completed load of Log" in k or "Startup complete" in k for k in kept)


def test_the_files_named_are_those_that_exist_below_the_node(tmp_path: Path) -> None:
    root = tmp_path / "n2"
    part = root / "data/kafka/t-8.abc-delete"
    part.mkdir(parents=True)
    (part / "leader-epoch-checkpoint").write_text("0\n1\n")
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("x")
    lines = [
        f"[t] ERROR Error while reading checkpoint file {part}/leader-epoch-checkpoint (X)",
        f"java.io.IOException: Expected [1] entries in checkpoint file [{part}/x]",
        f"[t] WARN Stopping serving logs in dir {root}/data/kafka (LogManager)",  # a directory
        f"[t] ERROR also {outside} and {root}/gone.log",  # outside the node; not there
    ]
    assert named_files(lines, root) == [part / "leader-epoch-checkpoint"]
