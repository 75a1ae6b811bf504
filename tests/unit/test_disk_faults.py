"""disk-full (and its tmpfs disk) without a cluster: what is refused, and the fill on a real tmpfs.

The faults themselves run on a real cluster in tests/integration/test_disk_faults_run.py.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import tmpfs_disk
from harness.cluster import Cluster
from harness.errors import ConfigError, HarnessError
from kafka_chaos.options import build_spec
from nemeses.disk_full import DiskFull


def test_disk_full_off_tmpfs_is_refused_before_anything_runs() -> None:
    for disk in ("plain", "lazyfs"):
        with pytest.raises(ConfigError, match=r"^disk-full needs broker data on tmpfs: add --disk"):
            build_spec(
                {"cluster": {"name": "no-such-cluster", "disk": disk},
                 "nemesis": {"faults": ["kill", "disk-full"]}}
            )  # fmt: skip
    spec = build_spec(
        {"cluster": {"name": "no-such-cluster", "disk": "tmpfs"},
         "nemesis": {"faults": ["disk-full"]}}
    )  # fmt: skip
    assert spec.cluster.disk == "tmpfs"


def test_a_scheduled_disk_full_is_refused_too() -> None:
    op = {"id": 0, "f": "disk-full", "at_s": 1, "duration_s": 1, "targets": ["n1"]}
    with pytest.raises(ConfigError, match=r"^disk-full needs broker data on tmpfs"):
        build_spec({"cluster": {"name": "no-such-cluster"}, "nemesis": {"schedule": [op]}})


def test_tmpfs_needs_the_local_backend_and_a_known_disk() -> None:
    with pytest.raises(ConfigError, match=r"^--disk tmpfs needs the local backend, not ssh$"):
        build_spec({"cluster": {"backend": "ssh", "inventory": "x.toml", "disk": "tmpfs"}})
    with pytest.raises(ConfigError, match=r"^cluster.disk must be one of plain, lazyfs, tmpfs"):
        build_spec({"cluster": {"disk": "ramdisk"}})


def test_the_fault_refuses_a_cluster_off_tmpfs() -> None:
    cluster = Cluster("c1", "local", [], "4.4.0", "kraft", {"disk": "lazyfs"})
    with pytest.raises(ConfigError, match=r"^disk-full needs .* cluster 'c1' is on a lazyfs disk"):
        DiskFull().check_cluster(cluster)


@pytest.mark.parametrize("text", ["12", "lots", "-5"])
def test_a_bad_tmpfs_size_is_one_line(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv("KC_TMPFS_MB", text)
    with pytest.raises(HarnessError, match=r"^KC_TMPFS_MB=.*at least 64$"):
        tmpfs_disk.size_mb()


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[dict]:
    """A real 8 MB tmpfs (root only), unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    rec = tmpfs_disk.record(str(tmp_path / "n1"), 8)
    tmpfs_disk.mount(rec)
    try:
        yield rec
    finally:
        subprocess.run(["umount", "-l", rec["mount"]], check=True)


def _sh(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)


def test_the_ballast_fills_the_mount_to_enospc_and_goes(small_tmpfs: dict) -> None:
    rec = small_tmpfs
    assert tmpfs_disk.is_mounted(rec["mount"])
    Path(rec["mount"], "00000000000000000000.log").write_bytes(b"x" * 100_000)  # a broker's data
    done = _sh(tmpfs_disk.fill_script(rec))
    assert done.returncode == 0, done.stderr
    ballast, left = map(int, done.stdout.split())
    assert left == 0 and os.statvfs(rec["mount"]).f_bavail == 0
    assert 7 * 2**20 < ballast < 8 * 2**20
    with pytest.raises(OSError, match="No space left on device"):  # what the broker meets
        with open(Path(rec["mount"], "more.log"), "wb") as f:
            f.write(b"y" * 65536)
            f.flush()
    assert _sh(tmpfs_disk.remove_script(rec)).stdout.strip() == "1"
    assert _sh(tmpfs_disk.remove_script(rec)).stdout.strip() == "0"  # idempotent, for the sweep
    assert os.statvfs(rec["mount"]).f_bavail > 0
    assert Path(rec["mount"], "00000000000000000000.log").stat().st_size == 100_000
