"""The libvirt side of the vagrant backend: the daemon, the accelerator, leftovers.

Machines without systemd (CI containers among them) do not start libvirtd
when it is installed, so ``ensure_daemon`` starts virtlogd and libvirtd
itself when nobody answers on the system socket.

``choose_driver`` decides between KVM and software emulation (TCG) by
trying: it boots the box's kernel without a root filesystem under each
accelerator and waits for the kernel's own panic.  A ``/dev/kvm`` that
exists is not proof: a nested hypervisor may accept the VM and never run
the guest kernel (seen on this project's CI machines).

Every libvirt object of a cluster is named after it by the Vagrantfile
(``cluster_names``), so ``leftovers`` and ``remove`` find them even when
Vagrant never recorded the machine (a harness killed during ``vagrant up``).
The names are matched whole: cluster ``a`` never claims cluster ``a-n1``'s.
"""

from __future__ import annotations

import glob
import ipaddress
import logging
import os
import re
import shutil
import subprocess
import time

from kafka_chaos.harness.backends import guard_routes
from kafka_chaos.harness.backends.hostcmd import host_ok, host_run
from kafka_chaos.harness.errors import HarnessError

log = logging.getLogger(__name__)

URI = "qemu:///system"
DAEMON_START_S = 30.0
PROBE_TIMEOUT_S = 20.0
BOX_CACHE = os.environ.get("KC_BOX_CACHE", "/var/cache/kafka-chaos/box")
# What a kernel prints once it runs, under any accelerator.
_KERNEL_RAN = (b"Kernel panic", b"Linux version")


def virsh(*args: str, timeout: float = 30.0, check: bool = True) -> str:
    return host_run(["virsh", "-c", URI, *args], timeout=timeout, check=check).stdout


def ensure_daemon() -> None:
    """Make sure libvirtd answers; start virtlogd and libvirtd if it does not."""
    if shutil.which("virsh") is None or shutil.which("libvirtd") is None:
        raise HarnessError(
            "libvirt is not installed: run `./setup.sh --vagrant` "
            "(libvirt-daemon-system, qemu-system-x86, vagrant-libvirt)"
        )
    if host_ok(["virsh", "-c", URI, "version"], timeout=15):
        return
    log.info("libvirtd does not answer; starting virtlogd and libvirtd")
    for daemon in ("virtlogd", "libvirtd"):
        host_run([daemon, "-d"], timeout=15, check=False)
    deadline = time.monotonic() + DAEMON_START_S
    while time.monotonic() < deadline:
        if host_ok(["virsh", "-c", URI, "version"], timeout=15):
            return
        time.sleep(0.5)
    raise HarnessError(f"libvirtd did not answer on {URI} within {DAEMON_START_S:.0f}s")


def probe_kernel() -> str | None:
    """The newest kernel of a locally built box, to try the accelerators with."""
    kernels = sorted(glob.glob(f"{BOX_CACHE}/*/rootfs/boot/vmlinuz-*"), key=os.path.getmtime)
    return kernels[-1] if kernels else None


def kernel_runs(accel: str, kernel: str, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
    """Whether ``kernel`` starts under ``accel`` (kvm or tcg) within ``timeout_s``."""
    qemu = shutil.which("qemu-system-x86_64")
    if qemu is None:
        raise HarnessError("qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)")
    args = [
        qemu, "-accel", accel, "-m", "256", "-kernel", kernel,
        "-append", "console=ttyS0 panic=-1", "-nographic", "-no-reboot",
        "-nodefaults", "-serial", "stdio",
    ]  # fmt: skip
    proc = subprocess.Popen(
        args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    return any(mark in out for mark in _KERNEL_RAN)


def choose_driver() -> str:
    """``kvm`` when a guest kernel really runs under KVM here, else ``qemu`` (TCG).

    The answer is kept until the host reboots (its boot id changes): the
    trial costs up to ``PROBE_TIMEOUT_S`` when KVM does not work.
    """
    forced = os.environ.get("KC_LIBVIRT_DRIVER")
    if forced:
        log.info("libvirt driver %s (KC_LIBVIRT_DRIVER)", forced)
        return forced
    remembered = _remembered_driver()
    if remembered:
        log.info("libvirt driver %s (tried since the host booted)", remembered)
        return remembered
    driver = _try_drivers()
    if driver == "qemu" or probe_kernel() is not None:  # "kvm" untried is only a guess
        _remember_driver(driver)
    return driver


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return "unknown"


def _driver_file() -> str:
    return os.path.join(BOX_CACHE, "driver")


def _remembered_driver() -> str | None:
    try:
        with open(_driver_file()) as f:
            boot, driver = f.read().split()
    except (OSError, ValueError):
        return None
    return driver if boot == _boot_id() and driver in ("kvm", "qemu") else None


def _remember_driver(driver: str) -> None:
    try:
        os.makedirs(BOX_CACHE, exist_ok=True)
        with open(_driver_file(), "w") as f:
            f.write(f"{_boot_id()} {driver}\n")
    except OSError as e:
        log.debug("could not remember the libvirt driver: %s", e)


def _try_drivers() -> str:
    if not os.path.exists("/dev/kvm"):
        log.info("libvirt driver qemu: no /dev/kvm, guests run under software emulation (TCG)")
        return "qemu"
    kernel = probe_kernel()
    if kernel is None:
        log.info("libvirt driver kvm: /dev/kvm exists and no local box kernel to try it with")
        return "kvm"
    started = time.monotonic()
    if kernel_runs("kvm", kernel):
        log.info("libvirt driver kvm: a guest kernel ran under KVM")
        return "kvm"
    log.warning(
        "libvirt driver qemu: /dev/kvm exists but a guest kernel did not run under it "
        "within %.0fs; guests run under software emulation (TCG), several times slower",
        time.monotonic() - started,
    )
    return "qemu"


def cluster_names(cluster: str) -> re.Pattern[str]:
    """The libvirt names the Vagrantfile gives cluster ``cluster``'s objects: domains
    ``kc-<cluster>-n<i>``, their disks ``kc-<cluster>-n<i>.img``, and the networks
    ``kc-<cluster>-mgmt`` and ``kc-<cluster>-net``."""
    return re.compile(rf"^kc-{re.escape(cluster)}-(n\d+|n\d+\.img|mgmt|net)$")


def leftovers(names: re.Pattern[str]) -> dict[str, list[str]]:
    """The cluster's libvirt domains, volumes and networks still defined."""
    found: dict[str, list[str]] = {"domains": [], "volumes": [], "networks": []}
    if not host_ok(["virsh", "-c", URI, "version"], timeout=15):
        return found
    found["domains"] = _named(virsh("list", "--all", "--name"), names)
    found["networks"] = _named(virsh("net-list", "--all", "--name"), names)
    for pool in _names(virsh("pool-list", "--all", "--name")):
        vols = virsh("vol-list", pool, check=False)
        for line in vols.splitlines()[2:]:
            parts = line.split()
            if parts and names.match(parts[0]):
                found["volumes"].append(f"{pool}/{parts[0]}")
    return found


def remove(names: re.Pattern[str]) -> list[str]:
    """Destroy and undefine every libvirt object ``names`` matches; what was removed."""
    removed = []
    objects = leftovers(names)
    for domain in objects["domains"]:
        virsh("destroy", domain, check=False)
        virsh("undefine", domain, "--remove-all-storage", "--nvram", check=False)
        removed.append(f"libvirt domain {domain}")
    for volume in leftovers(names)["volumes"]:  # what undefine left (an unattached image)
        pool, name = volume.split("/", 1)
        virsh("vol-delete", name, "--pool", pool, check=False)
        removed.append(f"libvirt volume {volume}")
    for network in objects["networks"]:
        virsh("net-destroy", network, check=False)
        virsh("net-undefine", network, check=False)
        removed.append(f"libvirt network {network}")
    still = {k: v for k, v in leftovers(names).items() if v}
    if still:
        raise HarnessError(f"libvirt objects remain after removal: {still}")
    return removed


def guard_prefix(subnet: str) -> str:
    """The blackhole that covers a guest network's /24 ``subnet`` (``a.b.c``).

    It is one bit wider than the network: libvirt refuses to create a network
    whose exact prefix already has a route ("already in use by interface *"),
    and the network's own /24 route beats a /23 while the network exists.
    """
    return str(ipaddress.ip_network(f"{subnet}.0/24").supernet(new_prefix=23))


def add_guard_routes(subnets: list[str]) -> list[str]:
    """Make each guest network unreachable except through its libvirt bridge.

    Without this, a packet for a VM address sent while the bridge is down (before
    ``vagrant up`` made it, or after ``cluster down`` removed it) would follow the
    default route off this machine.  Returns the guards, for ``remove_guard_routes``.
    """
    guards = sorted({guard_prefix(s) for s in subnets})
    for guard in guards:
        guard_routes.add(guard)
    return guards


def remove_guard_routes(guards: list[str], keep: set[str] = frozenset()) -> list[str]:
    """Remove the guards not in ``keep`` (another cluster's); what was removed."""
    removed = []
    for guard in guards:
        if guard not in keep and guard_routes.remove(guard):
            removed.append(f"guard route {guard}")
    return removed


def _names(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def _named(text: str, names: re.Pattern[str]) -> list[str]:
    return [n for n in _names(text) if names.match(n)]
