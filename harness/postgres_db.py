"""PostgreSQL on a node, over SSH only: the shared storage a Tansu cluster keeps its data in.

Why a module: a Tansu broker is stateless; every record, offset and group
lives in one PostgreSQL, so that database is a node of the cluster like a
broker: configured, started and stopped through a pid file
(``harness.services``), faulted by the nemeses, wiped by ``cluster down``,
and read after the heal for what it holds.  It is Debian's PostgreSQL
(``./setup.sh --tansu``), run as the ``postgres`` user from a data directory
under the node's root, with Debian's defaults for durability (``fsync`` and
``synchronous_commit`` on): the harness tests the broker, not a weakened
database.

Clients: the listed broker addresses get ``trust`` access and nothing else
does (the nodes' addresses are the harness's own, in namespaces or VMs).
"""

from __future__ import annotations

from kafka_chaos.harness import services
from kafka_chaos.harness.errors import CommandFailed, HarnessError
from kafka_chaos.harness.node import Node, RunResult, quote
from kafka_chaos.harness.services import Service

POSTGRES = Service("postgres", tagged_by="environ", stop_signal="INT", with_children=True)
PORT = 5432
USER = "postgres"  # Debian's system user, and the database's superuser
INIT_TIMEOUT_S = 120.0
SQL_TIMEOUT_S = 30.0
# The newest PostgreSQL Debian installed on the node.
_BIN = "bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1); "
_NEED_BIN = (
    _BIN + '[ -x "$bin/postgres" ] || { echo "PostgreSQL is not installed '
    '(apt-get install postgresql, or ./setup.sh --tansu)" >&2; exit 7; }; '
)
_AS_POSTGRES = f"setpriv --reuid={USER} --regid={USER} --init-groups"


def data_dir(node: Node) -> str:
    return node.path("data", "postgres")


def socket_dir(node: Node) -> str:
    return node.path("run", "postgres")


def configure(
    node: Node, clients: list[str], port: int = PORT, settings: dict[str, str] | None = None
) -> None:
    """Create the data directory once (initdb), let ``clients`` in, and write the launcher.

    Idempotent: an existing data directory is kept, with its data; only the
    client list and the launcher are rewritten.  ``settings`` are extra
    server settings (``-c name=value``, after the harness's own, so they win):
    statement and lock-wait logging for a finding's mechanism.
    """
    extra = "".join(f" -c {quote(f'{k}={v}')}" for k, v in (settings or {}).items())
    data, sock = quote(data_dir(node)), quote(socket_dir(node))
    hba = "".join(f"host all all {c}/32 trust\\n" for c in clients)
    launcher = (
        "#!/bin/sh\n"
        "# written by kafka-chaos (harness/postgres_db.py)\n"
        f"export KAFKA_CHAOS_ROOT={quote(node.root_dir)}\n"
        + _BIN.rstrip("; ")
        + "\n"
        # A crashed server's lock files (data directory, socket) name its pid,
        # which may still be a zombie its new parent has not reaped: PostgreSQL
        # would take that for a live server and refuse to start. A dead or
        # zombie owner's lock is stale.
        + services.ALIVE_FN
        + f"\nfor lock in {data}/postmaster.pid {sock}/.s.PGSQL.*.lock; do "
        'old=$(head -n 1 "$lock" 2>/dev/null); case "$old" in ""|*[!0-9]*) continue;; esac; '
        'alive "$old" || rm -f "$lock"; done\n'
        f"echo $$ > {quote(POSTGRES.pid_file(node))}\n"
        f'exec {_AS_POSTGRES} "$bin/postgres" -D {data} -p {port} '
        f"-c listen_addresses={quote(node.address)} -c unix_socket_directories={sock} "
        "-c logging_collector=off -c log_line_prefix='%m [%p] '" + extra + "\n"
    )
    script = (
        _NEED_BIN
        + f"mkdir -p {quote(node.path('config'))} {quote(node.path('run'))} "
        + f"{quote(node.path('data'))} {sock}; chown {USER}: {sock}; "
        + f"if [ ! -f {data}/PG_VERSION ]; then rm -rf {data}; mkdir -p {data}; "
        + f"chown {USER}: {data}; chmod 700 {data}; "
        + f'{_AS_POSTGRES} "$bin/initdb" -D {data} -U {USER} --auth=trust --no-sync '
        + "-E UTF8 --locale=C.UTF-8 >/dev/null || exit 8; fi; "
        # the client list is the harness's, whole: local connections, then each broker
        + f"printf 'local all all trust\\n{hba}' > {data}/pg_hba.conf; "
        + f"chown {USER}: {data}/pg_hba.conf; "
        + f"printf '%s' {quote(launcher)} > {quote(POSTGRES.launcher(node))}"
    )
    _checked(node, node.run(script, timeout=INIT_TIMEOUT_S, check=False), "configuring PostgreSQL")


def sql(node: Node, query: str, database: str = "postgres", port: int = PORT) -> str:
    """Run ``query`` over the node's socket; its rows, ``|``-separated, one per line."""
    what = f"psql on {database}"
    return _psql(node, f"-At -c {quote(query)}", database, port, what, SQL_TIMEOUT_S)


def apply_file(node: Node, text: str, database: str, port: int = PORT) -> None:
    """Run a whole SQL file (a schema) on ``database``, stopping at its first error."""
    remote = node.path("config", "postgres-apply.sql")
    node.write_files({remote: text})
    what = f"applying SQL to {database}"
    _psql(node, f"-f {quote(remote)}", database, port, what, INIT_TIMEOUT_S)


def _psql(node: Node, args: str, database: str, port: int, what: str, timeout_s: float) -> str:
    """``psql`` as the superuser over the node's socket, stopping at the first error."""
    res = node.run(
        _NEED_BIN
        + f'"$bin/psql" -X -q -v ON_ERROR_STOP=1 -h {quote(socket_dir(node))} -p {port} '
        + f"-U {USER} -d {quote(database)} {args}",
        timeout=timeout_s,
        check=False,
    )
    return _checked(node, res, what).stdout


def _checked(node: Node, res: RunResult, what: str) -> RunResult:
    """``res`` when it succeeded; else one line: PostgreSQL missing, or what failed and why."""
    if res.exit_code == 7:
        raise HarnessError(f"{node.name}: {res.stderr.strip()}")
    if res.exit_code != 0:
        raise CommandFailed(
            f"{node.name}: {what} exited {res.exit_code}: "
            f"{(res.stderr or res.stdout).strip() or '(no output)'}"
        )
    return res


def ready(node: Node, port: int = PORT) -> bool:
    """Whether the server accepts connections (``pg_isready``), bounded in time."""
    res = node.run(
        _NEED_BIN + f'"$bin/pg_isready" -q -t 5 -U {USER} -h {quote(socket_dir(node))} -p {port}',
        timeout=15,
        check=False,
    )
    return res.exit_code == 0


def create_database(node: Node, name: str, port: int = PORT) -> bool:
    """Create database ``name`` unless it exists; True when it was created now."""
    if sql(node, f"SELECT 1 FROM pg_database WHERE datname = '{name}'", port=port).strip():
        return False
    sql(node, f'CREATE DATABASE "{name}"', port=port)
    return True


def start(node: Node) -> bool:
    """Start PostgreSQL from its launcher; False if it was already running."""
    return services.start(POSTGRES, node)


def stop(node: Node, timeout_s: float = services.STOP_TIMEOUT_S) -> bool:
    """A fast shutdown (SIGINT: clients are cut off, the data checkpointed)."""
    return services.stop(POSTGRES, node, timeout_s)


def wipe(node: Node) -> None:
    """Delete the node's database files; refuses while PostgreSQL runs."""
    if services.running(POSTGRES, node):
        raise HarnessError(f"{node.name}: stop PostgreSQL before wiping its data")
    node.run(f"rm -rf {quote(data_dir(node))} {quote(socket_dir(node))}", timeout=60)
