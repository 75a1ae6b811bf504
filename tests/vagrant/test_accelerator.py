"""Choosing KVM or TCG by trying: the box's kernel must really run."""

from __future__ import annotations

from kafka_chaos.harness.backends import libvirt_host


def test_the_box_kernel_runs_under_software_emulation() -> None:
    kernel = libvirt_host.probe_kernel()
    assert kernel is not None, "no box kernel: ./setup.sh --vagrant builds the box"
    assert libvirt_host.kernel_runs("tcg", kernel)


def test_a_file_that_is_no_kernel_does_not_run(tmp_path) -> None:
    fake = tmp_path / "vmlinuz"
    fake.write_bytes(b"\0" * 4096)
    assert not libvirt_host.kernel_runs("tcg", str(fake), timeout_s=10)
