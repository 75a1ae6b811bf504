"""Session-wide test policy.

In CI nothing may be skipped silently: a skip there means a missing install
step or a missing privilege, so it is turned into a failure that says why.
"""

from __future__ import annotations

import os

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("CI") and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.longrepr = f"skipped in CI, which must run everything: {reason}"


def pytest_terminal_summary(terminalreporter) -> None:
    """Show what tests chose to log with ``record_property("logged", text)`` (the
    property tests' seeds and example counts), even when they pass."""
    lines = [
        f"{report.nodeid}: {value}"
        for report in terminalreporter.stats.get("passed", [])
        for name, value in report.user_properties
        if name == "logged"
    ]
    if lines:
        terminalreporter.section("logged by tests")
        for line in lines:
            terminalreporter.write_line(line)
