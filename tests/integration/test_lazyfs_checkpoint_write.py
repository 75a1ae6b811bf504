"""Kafka's checkpoint write (tmp, fsync, rename, fsync dir) cut by lazyfs at each step.

evidence/power-loss-torn-leader-epoch-checkpoint-4.4.0/repro: on the pinned
lazyfs, that sequence must read back the old file or the new one whole at
every cut, while the same write without its fsync loses the new bytes (so
the cut does drop something).  Needs only lazyfs and /dev/fuse (no Kafka,
no cluster); a few seconds.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from _lazyfs_skip import lazyfs_missing

REPRO = (
    Path(__file__).resolve().parents[2]
    / "evidence"
    / "power-loss-torn-leader-epoch-checkpoint-4.4.0"
    / "repro"
)


pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="mounting lazyfs with allow_other needs root"),
    pytest.mark.skipif(bool(lazyfs_missing()), reason=lazyfs_missing() or "lazyfs built"),
]


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, REPRO / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # run_repro imports ckpt_write by name
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def root() -> Iterator[Path]:
    """A directory of our own in /tmp: not pytest's tmp_path, whose "pytest-of-root"
    has the "-o" that makes lazyfs ignore its --config-path (lazyfs main.cpp, main)."""
    path = Path(tempfile.mkdtemp(prefix="ckptrepro_"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_kafka_way_reads_back_old_or_new_whole_at_every_cut(root: Path) -> None:
    cw = _load("ckpt_write")
    rr = _load("run_repro")
    no_fsync = next(v for v in cw.VARIANTS if v.name == "no-file-fsync")
    got = rr.run_matrix(root, [cw.KAFKA, no_fsync], trials=1)
    old, new = repr(cw.OLD)[1:], repr(cw.NEW)[1:]  # as ckpt_write shows them

    def only(variant: str, cut: str) -> str:
        (file, _tmp), = got[(variant, cut)]  # fmt: skip
        return file

    assert [only("kafka", c) for c in cw.CUTS] == [old, old, new, new]
    assert only("no-file-fsync", "after-rename") == "''"  # the cut dropped the unsynced bytes
    assert not rr.lazyfs.mounted_below(str(root))
