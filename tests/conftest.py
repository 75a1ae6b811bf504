"""Session-wide test policy.

In CI nothing may be skipped silently: a skip there means a missing install
step or a missing privilege, so it is turned into a failure that says why.

Tiers: every test is marked by its folder (``unit``, ``integration``,
``browser``, ``vagrant``), so ``pytest -m unit`` picks one.  ``./test.sh
--fast`` (``KC_TEST_TIER=fast``) runs the unit tier, property tests
included, with fewer generated histories per property test (``FAST_EXAMPLES``:
each test still sees every kind of history it asserts on, so nothing is
skipped, only sampled less), and leaves out the unit tests marked ``slow``
(end-to-end checks of one whole history each), to answer within minutes on
a 2-core machine.
The full tier keeps the counts each test sets by default.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _xdist_order import longest_first, make_scheduler
from hypothesis import settings

# No example database: a property test draws what its seed says, the same on a
# developer's machine as in a clean CI clone.  (With the database, examples a
# past run saved are replayed first, and a test whose assertions need each
# kind of injected anomaly drawn once passed or failed by the machine's past.)
settings.register_profile("kafka-chaos", database=None)
settings.load_profile("kafka-chaos")

TIERS = ("unit", "integration", "browser", "vagrant")
# Property tests read their example counts from these variables.
FAST_EXAMPLES = {
    "CHECKER_PROPERTY_EXAMPLES": "40",
    "TXN_PROPERTY_EXAMPLES": "120",  # every injected kind shows up in each mode (100 misses one)
    "CYCLE_PROPERTY_EXAMPLES": "25",
    # GRAPH_PROPERTY_EXAMPLES stays at its 60: with 25 the seed gives 11 cyclic of 50
    # histories, under the test's floor of a quarter, and 60 cost no more (one Spark job).
    "SHARE_PROPERTY_EXAMPLES": "10",
    "MIRROR_PROPERTY_EXAMPLES": "12",
    "STATISTICS_PROPERTY_EXAMPLES": "40",
}
if os.environ.get("KC_TEST_TIER") == "fast":
    for name, count in FAST_EXAMPLES.items():
        os.environ.setdefault(name, count)


def pytest_collection_modifyitems(config, items) -> None:
    """Mark each test with its tier: the folder it lives in under tests/."""
    here = Path(__file__).parent
    for item in items:
        parts = Path(str(item.path)).relative_to(here).parts
        if parts and parts[0] in TIERS:
            item.add_marker(parts[0])
    if hasattr(config, "workerinput"):  # an xdist worker: the order its scheduler hands out
        items[:] = longest_first(items)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Under pytest-xdist (``./test.sh`` runs two workers), hand out whole units:
    every cluster test to one worker, in order, and each unit module whole to
    either worker, because some property tests read what an earlier test of
    their module collected.  The unit tests, mostly Spark planning on one
    core, then run beside the cluster tests, which mostly wait on the clock.
    Longest first (tests/_xdist_order.py says why).

    (A scheduler, not ``xdist_group`` marks: loadgroup renames node ids, which
    pytest 9.2 no longer lets a plugin do.)
    """
    return make_scheduler(config, log)


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
