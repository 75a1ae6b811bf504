"""One sshd per local node, confined to the node's namespace and root_dir.

Debian's own /usr/sbin/sshd is used with a config file living under the
node's root_dir, so the daemon's command line names root_dir (the ownership
proof teardown checks before signalling) and its pid file sits in
``<root_dir>/run`` with every other process of the node.
"""

from __future__ import annotations

from pathlib import Path

from kafka_chaos.harness.backends.hostcmd import host_run
from kafka_chaos.harness.backends.local_plan import LocalNodePlan

SSHD = "/usr/sbin/sshd"
PRIVSEP_DIR = Path("/run/sshd")


def render_sshd_config(node: LocalNodePlan, authorized_keys: str) -> str:
    """sshd_config for ``node``: key-only root login on the node address."""
    root = node.root_dir
    return "\n".join(
        [
            f"# kafka-chaos node {node.name}, root_dir {root}",
            f"ListenAddress {node.address}",
            "Port 22",
            f"HostKey {root}/config/ssh_host_ed25519_key",
            f"PidFile {root}/run/sshd.pid",
            f"AuthorizedKeysFile {authorized_keys}",
            "PermitRootLogin prohibit-password",
            "PubkeyAuthentication yes",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "UsePAM no",
            "StrictModes no",
            "PrintMotd no",
            "UseDNS no",
            # clients, nemeses and log collection open many sessions at once
            "MaxStartups 100:30:200",
            "MaxSessions 100",
            "Subsystem sftp internal-sftp",
            # bash sources ~/.bashrc for commands run by sshd only when it is a
            # top-level shell (SHLVL < 2 after its own increment).  A heavy
            # root .bashrc (pyenv init here) cost 120 ms of every command and
            # delayed every fault and heal by as much.
            "SetEnv SHLVL=1",
            "",
        ]
    )


def config_path(node: LocalNodePlan) -> Path:
    return Path(node.root_dir) / "config" / "sshd_config"


def host_key_path(node: LocalNodePlan) -> Path:
    return Path(node.root_dir) / "config" / "ssh_host_ed25519_key"


def start_sshd(node: LocalNodePlan) -> None:
    """Start the node's sshd inside its namespace; it daemonizes and writes its pid file."""
    PRIVSEP_DIR.mkdir(mode=0o755, exist_ok=True)
    host_run(["ip", "netns", "exec", node.namespace, SSHD, "-f", str(config_path(node))])
