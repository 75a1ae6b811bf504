"""The vagrant backend: Debian VMs from ``vagrant/Vagrantfile``.

The harness SSHes to each VM where ``vagrant ssh-config`` says (a forwarded
port on 127.0.0.1 with VirtualBox, the management address with libvirt), as
root with Vagrant's per-machine key (provisioning authorizes it for root).
Brokers and clients use the VM's fixed private address instead, which the
Vagrantfile derives from the machine name exactly like ``private_address``
below: node ``n<i>`` is ``<KC_SUBNET>.<10+i>``.  Both read ``KC_SUBNET``
(default 192.168.56) and ``KC_NODES``, and the harness passes them to every
vagrant command so the two sides cannot disagree.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka_chaos.harness.backends import guest_speed, libvirt_host, procs, remote
from kafka_chaos.harness.backends.hostcmd import host_run
from kafka_chaos.harness.cluster import Cluster, cluster_dir
from kafka_chaos.harness.errors import ConfigError, HarnessError
from kafka_chaos.harness.node import Node, SSHTarget
from kafka_chaos.harness.spec import ClusterSpec

log = logging.getLogger(__name__)

REMOTE_ROOT = "/var/lib/kafka-chaos"
DEFAULT_SUBNET = "192.168.56"
DEFAULT_MGMT_SUBNET = "192.168.121"  # Vagrant's management network (DHCP)
DEFAULT_VAGRANT_DIR = Path(__file__).resolve().parents[2] / "vagrant"
LOCAL_BOX = "kafka-chaos/bookworm"  # built by vagrant/build-box.sh
STATUS_TIMEOUT_S = 180.0
UP_TIMEOUT_S = 600.0  # per cluster with hardware acceleration
TCG_SLOWDOWN = 4  # a software-emulated `vagrant up` gets this many times longer
BOX_BUILD_TIMEOUT_S = 1800.0
DESTROY_TIMEOUT_S = 300.0
_MACHINE = re.compile(r"^n(\d+)$")


@dataclass(frozen=True)
class SSHConfigHost:
    """One ``Host`` block of ``vagrant ssh-config`` output."""

    alias: str
    hostname: str
    user: str
    port: int
    identity_file: str | None


def parse_ssh_config(text: str) -> list[SSHConfigHost]:
    """Parse ``vagrant ssh-config`` output (one ``Host`` block per machine).

    Keywords are case-insensitive and may use ``Key value`` or ``Key=value``;
    values may be double-quoted (paths with spaces).  The first IdentityFile
    wins, as with OpenSSH.
    """
    blocks: list[dict[str, str]] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, value = _split_option(line, number)
        if key == "host":
            blocks.append({"host": value})
        elif not blocks:
            raise HarnessError(f"vagrant ssh-config line {number}: {key!r} before any Host")
        else:
            blocks[-1].setdefault(key, value)
    return [_host_from_block(b) for b in blocks]


def _split_option(line: str, number: int) -> tuple[str, str]:
    match = re.match(r"^(\S+?)(?:\s*=\s*|\s+)(.*)$", line)
    if not match:
        raise HarnessError(f"vagrant ssh-config line {number}: no value in {line!r}")
    value = match.group(2).strip()
    if value.startswith('"'):
        value = " ".join(shlex.split(value))
    return match.group(1).lower(), value


def _host_from_block(block: dict[str, str]) -> SSHConfigHost:
    alias = block["host"]
    if "hostname" not in block:
        raise HarnessError(f"vagrant ssh-config: Host {alias} has no HostName")
    port = block.get("port", "22")
    if not port.isdigit():
        raise HarnessError(f"vagrant ssh-config: Host {alias} has a bad Port {port!r}")
    return SSHConfigHost(
        alias=alias,
        hostname=block["hostname"],
        user=block.get("user", "vagrant"),
        port=int(port),
        identity_file=block.get("identityfile"),
    )


def parse_status(text: str) -> dict[str, str]:
    """Machine name -> state, from ``vagrant status --machine-readable``."""
    states = {}
    for line in text.splitlines():
        parts = line.split(",")
        if len(parts) >= 4 and parts[2] == "state" and parts[1]:
            states[parts[1]] = parts[3]
    return states


def machine_index(machine: str) -> int:
    """``i`` of machine ``n<i>``, the Vagrantfile's naming."""
    match = _MACHINE.match(machine)
    if not match:
        raise HarnessError(f"vagrant machine {machine!r} is not named n<i> like the Vagrantfile's")
    return int(match.group(1))


def private_address(subnet: str, machine: str) -> str:
    """The Vagrantfile's fixed private address of machine ``n<i>``."""
    return f"{subnet}.{10 + machine_index(machine)}"


def nodes_from_ssh_config(
    hosts: list[SSHConfigHost], cluster: str, subnet: str, known_hosts: str
) -> list[Node]:
    """Nodes ordered n1..nN: SSH to the ssh-config endpoint as root, address = private IP."""
    ordered = sorted(hosts, key=lambda h: machine_index(h.alias))
    return [
        Node(
            name=h.alias,
            node_id=i,
            address=private_address(subnet, h.alias),
            ssh=SSHTarget(
                host=h.hostname,
                port=h.port,
                user="root",
                key_file=h.identity_file,
                known_hosts=known_hosts,
            ),
            root_dir=f"{REMOTE_ROOT}/{cluster}",
        )
        for i, h in enumerate(ordered, start=1)
    ]


def vagrant_env(spec: ClusterSpec, vagrant_dir: Path, driver: str | None = None) -> dict[str, str]:
    """What every vagrant command of this cluster runs with, so the harness and
    the Vagrantfile agree on names and addresses, and each cluster keeps its
    own machine records (``VAGRANT_DOTFILE_PATH`` in the cluster's state dir)."""
    env = {
        **os.environ,
        "KC_NODES": str(spec.nodes),
        "KC_SUBNET": _subnet(),
        "KC_MGMT_SUBNET": _mgmt_subnet(),
        "KC_CLUSTER": spec.name,
        "KC_BOX": box_name(),
        "VAGRANT_CWD": str(vagrant_dir),
        "VAGRANT_DOTFILE_PATH": str(cluster_dir(spec.name) / "vagrant"),
        "VAGRANT_DEFAULT_PROVIDER": os.environ.get("VAGRANT_DEFAULT_PROVIDER", "libvirt"),
        "VAGRANT_NO_COLOR": "1",
    }
    if driver:
        env["KC_LIBVIRT_DRIVER"] = driver
    return env


def box_name() -> str:
    """The box: the locally built one unless ``KC_BOX`` names another (debian/bookworm64)."""
    return os.environ.get("KC_BOX", LOCAL_BOX)


def _subnet() -> str:
    return os.environ.get("KC_SUBNET", DEFAULT_SUBNET)


def _mgmt_subnet() -> str:
    return os.environ.get("KC_MGMT_SUBNET", DEFAULT_MGMT_SUBNET)


def _guards() -> list[str]:
    """The blackhole routes that keep both guest networks on this machine."""
    return sorted({libvirt_host.guard_prefix(s) for s in (_subnet(), _mgmt_subnet())})


def _vagrant_dir(spec: ClusterSpec) -> Path:
    path = Path(spec.vagrant_dir or DEFAULT_VAGRANT_DIR).expanduser().resolve()
    if not (path / "Vagrantfile").is_file():
        raise ConfigError(f"{path}: no Vagrantfile there; pass --vagrant-dir DIR")
    if shutil.which("vagrant") is None:
        raise HarnessError("`vagrant` is not installed: run `./setup.sh --vagrant`")
    return path


def _libvirt(env: dict[str, str]) -> bool:
    return env["VAGRANT_DEFAULT_PROVIDER"] == "libvirt"


def create(spec: ClusterSpec) -> Cluster:
    """Build the box if needed, bring the VMs up, connect as ``vagrant ssh-config`` says.

    cluster.json is written before ``vagrant up`` starts, so a ``cluster down``
    after the harness was killed mid-boot knows the cluster is a vagrant one
    and removes what libvirt already holds.
    """
    vagrant_dir = _vagrant_dir(spec)
    libvirt = _libvirt(vagrant_env(spec, vagrant_dir))
    guards = _guards() if libvirt else []
    Cluster(
        name=spec.name,
        backend=spec.backend,
        nodes=[],
        kafka_version=spec.kafka_version,
        mode=spec.mode,
        backend_state={"vagrant_dir": str(vagrant_dir), "phase": "vagrant up", "guards": guards},
    ).save()
    try:
        if libvirt:
            libvirt_host.add_guard_routes([_subnet(), _mgmt_subnet()])
        return _create(spec, vagrant_dir)
    except BaseException:
        log.warning("cluster %s: vagrant up failed; `cluster down` removes what it made", spec.name)
        raise


def _create(spec: ClusterSpec, vagrant_dir: Path) -> Cluster:
    env = vagrant_env(spec, vagrant_dir)
    driver = None
    if _libvirt(env):
        libvirt_host.ensure_daemon()
        if box_name() == LOCAL_BOX:
            _timed("box build", lambda: build_box(vagrant_dir))
        driver = libvirt_host.choose_driver()
        env = vagrant_env(spec, vagrant_dir, driver)
    wanted = [f"n{i}" for i in range(1, spec.nodes + 1)]
    up = UP_TIMEOUT_S * (TCG_SLOWDOWN if driver == "qemu" else 1)
    _timed("vagrant up", lambda: run_logged(spec.name, ["vagrant", "up", *wanted], env, up))
    hosts = parse_ssh_config(
        host_run(["vagrant", "ssh-config", *wanted], timeout=STATUS_TIMEOUT_S, env=env).stdout
    )
    known_hosts = str(cluster_dir(spec.name) / "known_hosts")
    nodes = nodes_from_ssh_config(hosts, spec.name, _subnet(), known_hosts)
    state = {
        "vagrant_dir": str(vagrant_dir),
        "subnet": _subnet(),
        "driver": driver,
        "guards": _guards() if _libvirt(env) else [],
    }
    cluster = remote.provision(spec, nodes, pin_to=known_hosts, state=state)
    scale = guest_speed.measure(cluster)
    for n in cluster.nodes:
        n.time_scale = scale
    cluster.backend_state["time_scale"] = scale
    cluster.save()
    log.info("cluster %s: guests run %.1fx slower than the host; timeouts scaled", spec.name, scale)
    return cluster


def build_box(vagrant_dir: Path) -> None:
    """Build and register the local box (a no-op when this version is registered)."""
    script = vagrant_dir / "build-box.sh"
    if not script.is_file():
        script = DEFAULT_VAGRANT_DIR / "build-box.sh"
    out = host_run(["bash", str(script)], timeout=BOX_BUILD_TIMEOUT_S)
    log.info("%s", out.stdout.strip().splitlines()[-1] if out.stdout.strip() else "box ready")


def run_logged(cluster: str, args: list[str], env: dict[str, str], timeout: float) -> None:
    """Run a long vagrant command with its output in the cluster's vagrant.log and
    its pid in vagrant.pid, so ``cluster down`` can stop it if the harness dies."""
    state = cluster_dir(cluster)
    state.mkdir(parents=True, exist_ok=True)
    with open(state / "vagrant.log", "ab") as out:
        proc = subprocess.Popen(
            args, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        procs.write_pid_record(state / "vagrant.pid", proc.pid)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            procs.stop_group(proc.pid)
            raise HarnessError(
                f"`{' '.join(args)}` did not finish within {timeout:.0f}s; see {state}/vagrant.log"
            ) from None
        finally:
            (state / "vagrant.pid").unlink(missing_ok=True)
    if code != 0:
        raise HarnessError(f"`{' '.join(args)}` exited {code}: {_tail(state / 'vagrant.log')}")


def _tail(path: Path, lines: int = 5) -> str:
    text = path.read_text(errors="replace").replace("\r", "\n")
    return " | ".join(line.strip() for line in text.splitlines()[-lines:] if line.strip())


def _timed(what: str, fn: Any) -> None:
    started = time.monotonic()
    fn()
    log.info("%s: %.0fs", what, time.monotonic() - started)


def destroy(cluster: Cluster) -> list[str]:
    """Stop a running ``vagrant up``, clean the nodes, destroy the VMs and every
    libvirt object of the cluster, then forget it."""
    removed = []
    pid_file = cluster.state_dir / "vagrant.pid"
    stopped = procs.stop_recorded(pid_file)
    if stopped:
        removed.append(f"vagrant process {stopped}")
    if cluster.nodes:
        try:
            removed.extend(remote.teardown_nodes(cluster))
        except HarnessError as e:  # the VMs go anyway; their root_dir with them
            log.warning("%s", e)
    vagrant_dir = Path(cluster.backend_state.get("vagrant_dir") or DEFAULT_VAGRANT_DIR)
    spec = ClusterSpec(name=cluster.name, backend="vagrant", nodes=max(1, len(cluster.nodes)))
    if (cluster.state_dir / "vagrant").is_dir() and (vagrant_dir / "Vagrantfile").is_file():
        env = vagrant_env(spec, vagrant_dir)
        env["KC_NODES"] = "9"  # every machine this dot dir may know of
        res = host_run(
            ["vagrant", "destroy", "-f"], timeout=DESTROY_TIMEOUT_S, env=env, check=False
        )
        if res.returncode == 0:
            removed.append("vagrant machines")
        else:
            log.warning("vagrant destroy exited %d: %s", res.returncode, res.stderr.strip()[-300:])
    if shutil.which("virsh"):
        removed.extend(libvirt_host.remove(libvirt_host.cluster_names(cluster.name)))
    removed.extend(
        libvirt_host.remove_guard_routes(
            cluster.backend_state.get("guards", []), keep=_guards_of_other_clusters(cluster.name)
        )
    )
    cluster.close()
    shutil.rmtree(cluster.state_dir, ignore_errors=True)
    removed.append(f"cluster dir {cluster.state_dir}")
    return removed


def _guards_of_other_clusters(name: str) -> set[str]:
    """Guard routes another vagrant cluster still relies on (two clusters' subnets
    may share one /23)."""
    keep: set[str] = set()
    for other in cluster_dir(name).parent.glob("*/cluster.json"):
        if other.parent.name == name:
            continue
        try:
            state = json.loads(other.read_text()).get("backend_state", {})
        except (OSError, json.JSONDecodeError):
            continue
        keep.update(state.get("guards", []))
    return keep
