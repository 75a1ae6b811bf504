"""PostgreSQL as a node's service: the real server, started and crashed through its pid file.

A Tansu cluster's storage node runs this; here it runs in this machine's
shell (``ShellNode``) on a free port, so no namespace or SSH is needed.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from _shell_node import ShellNode
from kafka_chaos.harness import postgres_db, services, tansu_build
from kafka_chaos.harness.errors import CommandFailed, HarnessError
from kafka_chaos.harness.node import SSHTarget

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not list(Path("/usr/lib/postgresql").glob("*/bin/postgres")),
    reason="needs root and Debian's postgresql (./setup.sh --tansu)",
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def node() -> Iterator[ShellNode]:
    # pytest's tmp_path is 0700 root's: the postgres user could not reach its data.
    root = Path(tempfile.mkdtemp(prefix="kc-pg-"))
    root.chmod(0o755)
    n = ShellNode("s1", 1, "127.0.0.1", SSHTarget("127.0.0.1"), str(root / "s1"))
    yield n
    services.kill(postgres_db.POSTGRES, n)
    shutil.rmtree(root)


def test_data_committed_before_a_crash_is_there_after_it(node: ShellNode) -> None:
    port = _free_port()
    postgres_db.configure(node, clients=["127.0.0.1"], port=port)
    assert postgres_db.start(node) is True
    assert postgres_db.start(node) is False  # already running: not a second server
    _wait_ready(node, port)
    assert postgres_db.create_database(node, "tansu", port=port) is True
    assert postgres_db.create_database(node, "tansu", port=port) is False
    postgres_db.sql(node, "CREATE TABLE t (v int); INSERT INTO t VALUES (1), (2)", "tansu", port)

    pid = int(Path(postgres_db.POSTGRES.pid_file(node)).read_text())
    assert (Path(f"/proc/{pid}/status").read_text().split("Uid:")[1].split()[0]) == str(
        _uid("postgres")
    )  # it runs as the postgres user, not root
    assert services.kill(postgres_db.POSTGRES, node) is True  # SIGKILL: no shutdown checkpoint
    assert not services.running(postgres_db.POSTGRES, node)

    postgres_db.configure(node, clients=["127.0.0.1"], port=port)  # keeps the data directory
    assert postgres_db.start(node) is True
    _wait_ready(node, port)
    assert postgres_db.sql(node, "SELECT v FROM t ORDER BY v", "tansu", port).split() == ["1", "2"]
    assert postgres_db.stop(node) is True
    assert not services.running(postgres_db.POSTGRES, node)
    assert not postgres_db.ready(node, port)


def test_other_addresses_are_not_let_in(node: ShellNode) -> None:
    port = _free_port()
    postgres_db.configure(node, clients=["10.9.8.7"], port=port)
    hba = Path(postgres_db.data_dir(node), "pg_hba.conf").read_text().splitlines()
    assert hba == ["local all all trust", "host all all 10.9.8.7/32 trust"]
    postgres_db.start(node)
    _wait_ready(node, port)
    res = subprocess.run(
        ["psql", "-X", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-c", "SELECT 1"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert res.returncode != 0 and "no pg_hba.conf entry" in res.stderr


def test_tansus_schema_applies_to_this_postgresql(node: ShellNode) -> None:
    """Tansu 0.6.0's own schema (its release tag's, checked by sha256) on Debian's server."""
    try:
        schema = tansu_build.schema()
    except HarnessError as e:
        pytest.skip(f"Tansu's schema is not available here: {e}")
    port = _free_port()
    postgres_db.configure(node, clients=[], port=port)
    postgres_db.start(node)
    _wait_ready(node, port)
    postgres_db.create_database(node, "tansu", port=port)
    postgres_db.apply_file(node, schema.read_text(), "tansu", port=port)
    postgres_db.apply_file(node, schema.read_text(), "tansu", port=port)  # again: idempotent
    tables = postgres_db.sql(
        node, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'", "tansu", port
    ).split()
    assert {"cluster", "topic", "topition", "record", "watermark", "producer"} <= set(tables)
    with pytest.raises(CommandFailed, match="applying SQL to tansu exited"):
        postgres_db.apply_file(node, "SELECT * FROM no_such_table;", "tansu", port=port)


def test_extra_settings_reach_the_server_and_its_statement_log(node: ShellNode) -> None:
    """A finding's mechanism needs which transaction wrote what: statement logging on."""
    port = _free_port()
    prefix = "%m [%p] %x "
    postgres_db.configure(
        node, clients=[], port=port,
        settings={"log_statement": "mod", "log_line_prefix": prefix},
    )  # fmt: skip
    postgres_db.start(node)
    _wait_ready(node, port)
    assert postgres_db.sql(node, "SHOW log_statement", port=port).strip() == "mod"
    assert postgres_db.sql(node, "SHOW log_line_prefix", port=port) == prefix + "\n"
    postgres_db.sql(node, "CREATE TABLE u (v int); INSERT INTO u VALUES (42)", port=port)
    _wait_ready(node, port)
    out = Path(postgres_db.POSTGRES.stdout(node)).read_text()
    assert "statement: CREATE TABLE u (v int); INSERT INTO u VALUES (42)" in out


def test_wipe_refuses_a_running_server_and_then_removes_everything(node: ShellNode) -> None:
    port = _free_port()
    postgres_db.configure(node, clients=[], port=port)
    postgres_db.start(node)
    with pytest.raises(HarnessError, match="stop PostgreSQL before wiping"):
        postgres_db.wipe(node)
    postgres_db.stop(node)
    postgres_db.wipe(node)
    assert not Path(postgres_db.data_dir(node)).exists()


def _wait_ready(node: ShellNode, port: int) -> None:
    for _ in range(150):
        if postgres_db.ready(node, port):
            return
        subprocess.run(["sleep", "0.2"], check=True)
    out = Path(postgres_db.POSTGRES.stdout(node))
    pytest.fail(f"PostgreSQL not ready; its output: {out.read_text() if out.exists() else '-'}")


def _uid(user: str) -> int:
    import pwd

    return pwd.getpwnam(user).pw_uid
