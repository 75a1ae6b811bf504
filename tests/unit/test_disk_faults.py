"""disk-full and corrupt-segment without a cluster: what is refused, the fill on a real
tmpfs, and the damage done to real segment files.

The faults themselves run on a real cluster in tests/integration/test_disk_faults_run.py.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka_chaos.harness import tmpfs_disk
from kafka_chaos.harness.cluster import Cluster
from kafka_chaos.harness.errors import ConfigError, HarnessError
from kafka_chaos.nemeses import corrupt_segment, registry
from kafka_chaos.nemeses.disk_full import DiskFull
from kafka_chaos.nemeses.kinds import Ctx

from kafka_chaos.options import build_spec


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


# --- corrupt-segment --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"mode": "shred"}, r"mode must be flip or truncate, not 'shred'$"),
        ({"bytes": 0}, r"bytes must be a whole number 1\.\.4096, not 0$"),
        ({"bytes": "8"}, r"bytes must be a whole number 1\.\.4096, not '8'$"),
        ({"offset": 3}, r"takes mode, bytes and segment, not offset$"),
        ({"segment": "oldest"}, r"segment must be active or closed, not 'oldest'$"),
        ({"segment": None}, r"segment must be active or closed, not None$"),
    ],
)
def test_bad_corrupt_segment_params_are_one_line(params: dict, says: str) -> None:
    op = {"id": 0, "f": "corrupt-segment", "at_s": 1, "duration_s": 1, "targets": ["n1"],
          "params": params}  # fmt: skip
    with pytest.raises(ConfigError, match=r"^schedule\[0\]: corrupt-segment " + says):
        registry.op_from_dict(op, "schedule[0]")


def test_corrupt_segment_params_get_their_defaults() -> None:
    op = {"id": 0, "f": "corrupt-segment", "at_s": 1, "duration_s": 1, "targets": ["n1"]}
    assert registry.op_from_dict(op).params == {"mode": "flip", "bytes": 8}


def test_segment_is_kept_as_given_and_never_filled_in() -> None:
    """Schedules recorded before ``segment`` existed replay as they were recorded."""
    op = {"id": 0, "f": "corrupt-segment", "at_s": 1, "duration_s": 1, "targets": ["n1"],
          "params": {"segment": "closed", "mode": "truncate"}}  # fmt: skip
    assert registry.op_from_dict(op).params == {"mode": "truncate", "bytes": 8, "segment": "closed"}
    kind = registry.find("corrupt-segment")
    rng = random.Random(7)
    drafts = [kind.draw_params(rng, Ctx(("n1", "n2"))) for _ in range(50)]
    assert all(set(d) == {"mode", "bytes"} for d in drafts), "the generator's drafts changed"


def _segments(data: Path, topic: str, sizes: dict[int, list[int]]) -> dict[int, list[Path]]:
    """Partition directories of ``topic`` with segments of the given sizes (oldest first)."""
    made = {}
    for part, lengths in sizes.items():
        d = data / f"{topic}-{part}"
        d.mkdir(parents=True)
        made[part] = []
        for i, n in enumerate(lengths):
            seg = d / f"{i * 1000:020d}.log"
            seg.write_bytes(bytes(range(256)) * (n // 256) + bytes(n % 256))
            made[part].append(seg)
    return made


def _damage(
    data: Path, topic: str, mode: str, n: int, *segment: str
) -> subprocess.CompletedProcess[str]:
    args = ["python3", "-c", corrupt_segment._SCRIPT, str(data), topic, mode, str(n), *segment]
    return subprocess.run(args, capture_output=True, text=True, timeout=60)


def test_the_largest_newest_segment_of_the_topic_is_flipped_at_its_tail(tmp_path: Path) -> None:
    # partition 1's newest segment is the largest; chaos-extra and a deleted dir are not the topic
    made = _segments(tmp_path, "chaos", {0: [9000, 300], 1: [100, 1024], 2: [512]})
    _segments(tmp_path, "chaos-extra", {0: [50_000]})
    (tmp_path / "chaos-3.abc-delete").mkdir()
    before = made[1][-1].read_bytes()
    res = _damage(tmp_path, "chaos", "flip", 8)
    assert res.returncode == 0, res.stderr
    done = json.loads(res.stdout)
    assert (done["partition"], done["segment"], done["segments"]) == (1, str(made[1][-1]), 2)
    after = made[1][-1].read_bytes()
    assert after[:-8] == before[:-8] and len(after) == len(before)
    assert bytes(a ^ b for a, b in zip(after[-8:], before[-8:], strict=True)) == b"\xff" * 8


def test_truncate_cuts_the_tail_and_nothing_to_damage_is_exit_3(tmp_path: Path) -> None:
    made = _segments(tmp_path, "t", {0: [700]})
    done = json.loads(_damage(tmp_path, "t", "truncate", 64).stdout)
    assert (done["size_before"], done["size_after"]) == (700, 636)
    assert made[0][0].stat().st_size == 636
    _segments(tmp_path, "empty", {0: [0]})
    res = _damage(tmp_path, "empty", "flip", 8)
    assert res.returncode == 3 and "no active segment of empty with data" in res.stdout


def test_closed_picks_the_second_newest_segment_and_reads_the_recovery_point(
    tmp_path: Path,
) -> None:
    # partition 0's closed segment (9000 bytes) beats partition 1's (100); partition 2
    # has only an active segment, so no closed one to damage
    made = _segments(tmp_path, "chaos", {0: [9000, 300], 1: [100, 1024], 2: [512]})
    (tmp_path / "recovery-point-offset-checkpoint").write_text(
        "0\n3\nchaos 0 1000\nchaos-extra 0 5\nchaos 1 0\n"
    )
    before = made[0][0].read_bytes()
    res = _damage(tmp_path, "chaos", "flip", 8, "closed")
    assert res.returncode == 0, res.stderr
    done = json.loads(res.stdout)
    assert (done["partition"], done["segment"], done["which"]) == (0, str(made[0][0]), "closed")
    bounds = (done["base_offset"], done["next_base_offset"], done["recovery_point"])
    assert bounds == (0, 1000, 1000)
    assert done["below_recovery_point"] is True
    after = made[0][0].read_bytes()
    assert after[:-8] == before[:-8] and after[-8:] != before[-8:]
    assert made[0][1].stat().st_size == 300  # the active segment is untouched


def test_closed_with_no_closed_segment_is_exit_3_naming_what_there_is(tmp_path: Path) -> None:
    _segments(tmp_path, "one", {0: [700], 1: [50]})
    res = _damage(tmp_path, "one", "truncate", 8, "closed")
    assert res.returncode == 3
    assert json.loads(res.stdout)["error"].startswith("no closed segment of one with data")
    assert "one-0: 1 segment(s)" in res.stdout


def test_an_active_segment_above_the_checkpoint_is_not_below_it(tmp_path: Path) -> None:
    _segments(tmp_path, "a", {0: [700, 900]})
    (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n1\na 0 1000\n")
    done = json.loads(_damage(tmp_path, "a", "flip", 1).stdout)
    assert (done["which"], done["base_offset"], done["next_base_offset"]) == ("active", 1000, None)
    assert done["below_recovery_point"] is False


def test_replica_verification_says_which_broker_cut_a_damaged_segment() -> None:
    from kafka_chaos.forensics.replica_verify import summary

    found = [{"node": "n2", "partition": 0, "kind": "invalid-batch"},
             {"node": "n2", "partition": 0, "kind": "truncated"}]  # fmt: skip
    said = summary({"partitions": [], "corruptions": found})
    assert said.endswith("; n2 found a damaged segment of partition 0 on start and cut it back")


# --- slow-disk: refused, saying why ---------------------------------------------------


def test_slow_disk_is_refused_in_one_line_that_says_why() -> None:
    with pytest.raises(ConfigError) as refused:  # before any node is made
        build_spec({"cluster": {"disk": "lazyfs"}, "nemesis": {"faults": ["slow-disk"]}})
    line = str(refused.value)
    assert "\n" not in line
    assert line.startswith("nemesis.faults: fault 'slow-disk' is not available: ")
    assert "lazyfs (pinned a47a5ba) has no delay fault" in line and "dm-delay" in line
    assert registry.find("slow-disk") is None  # refused, never faked
