"""DumpLogSegments on the harness host, for nodes too slow to run it themselves.

On TCG guests (17-31x slower than the host) the replica verification's
DumpLogSegments JVMs ran for about 10 minutes after a 60 s run; copying
the same segment files out takes seconds.  The output is made to be the
node's own: every ``Dumping`` path is rewritten back to the node's path, so
parsing and comparing cannot tell where the tool ran.
"""

from __future__ import annotations

import gzip
import shlex
import subprocess
import tarfile
import tempfile
from pathlib import Path

from kafka_chaos.harness import kafka_config as kc
from kafka_chaos.harness import kafka_db
from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.errors import HarnessError
from kafka_chaos.harness.node import Node

FETCH_TIMEOUT_S = 300.0  # scaled by the node's speed in Node.run
DUMP_TIMEOUT_S = 600.0
DUMPING = "Dumping "


def dump_on_host(cluster: Cluster, node: Node, files: list[str], dest: Path) -> None:
    """Copy ``files`` (absolute paths on ``node``) here and dump them into gzip ``dest``."""
    dist = kafka_db.installed_distribution(cluster)
    main = kafka_db.dump_log_segments_class(cluster.kafka_version)
    with tempfile.TemporaryDirectory(prefix="kc-host-dump-") as tmp:
        root = Path(tmp)
        fs = root / "fs"
        _fetch(node, files, root / "segments.tar")
        with tarfile.open(root / "segments.tar") as tar:
            tar.extractall(fs, filter="data")  # GNU tar stored the paths without their "/"
        log_config = root / "tools-log.properties"
        log_config.write_text(kc.logging_config(dist.version, None))
        command = kc.java_command(
            str(root),
            kafka_db.TOOL_HEAP_MB,
            dist.host_classpath(tools=kafka_db.in_tools_jars(main)),
            kc.logging_flag(dist.version, str(log_config)),
            main,
            ["--files", ",".join(f"{fs}{f}" for f in files), "--print-data-log"],
        )
        raw = root / "dump.txt"
        try:
            with raw.open("w") as out:
                proc = subprocess.run(
                    shlex.split(command),  # java expands the classpath's "*" itself
                    stdout=out,
                    stderr=subprocess.PIPE,
                    text=True,
                    timeout=DUMP_TIMEOUT_S,
                )
        except subprocess.TimeoutExpired as e:
            raise HarnessError(f"{node.name}: DumpLogSegments on the host timed out") from e
        if proc.returncode != 0:
            raise HarnessError(
                f"{node.name}: DumpLogSegments on the host exited {proc.returncode}: "
                f"{proc.stderr.strip()[-500:] or '(no output)'}"
            )
        with raw.open() as lines, gzip.open(dest, "wt", compresslevel=1) as out:
            for line in lines:
                if line.startswith(DUMPING + str(fs)):
                    line = DUMPING + line[len(DUMPING) + len(str(fs)) :]
                out.write(line)


def _fetch(node: Node, files: list[str], local: Path) -> None:
    """One tar of the files on the node, one download: two round trips whatever the count."""
    remote = node.path("run", "replica-segments.tar")
    try:
        node.run(
            f"tar -cf {shlex.quote(remote)} -- {' '.join(shlex.quote(f) for f in files)}"
            " || [ $? -eq 1 ]",  # 1: a file changed while read (a live segment), still copied
            timeout=FETCH_TIMEOUT_S,
        )
        node.get(remote, local)
    finally:
        node.run(f"rm -f {shlex.quote(remote)}", timeout=30, check=False)
