"""Shrinking against a simulated cluster with a known minimal failing recipe.

The simulated cluster fails a run only when every fault of a hidden subset is
in the recipe, each lasting at least its hidden minimum, and the run lasts
until that subset's last fault heals; even then it fails only with
probability ``p`` (flaky, seeded).  The search must keep that subset and no
other fault, never keep a candidate that did not really fail, and stay within
a bound on candidates.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from kafka_chaos.harness.spec import TestSpec

from kafka_chaos.shrink.recipe import MIN_FAULT_S, Recipe, cuts
from kafka_chaos.shrink.search import Budget, Search


def recipe_of(n_faults: int, durations: list[float]) -> Recipe:
    options = TestSpec(name="t", seed=1, time_limit_s=20.0 * n_faults + 30).to_dict()
    ops = [
        {"id": i, "f": "kill", "at_s": 5.0 + 20 * i, "duration_s": durations[i],
         "target": "random", "targets": ["n1"]}
        for i in range(n_faults)
    ]  # fmt: skip
    return Recipe.of(options, ops)


class SimulatedCluster:
    def __init__(self, needed: dict[int, float], p: float, seed: int) -> None:
        self.needed = needed  # fault id -> its minimum duration
        self.p = p
        self.rng = random.Random(seed)
        self.runs = 0

    def could_fail(self, recipe: Recipe) -> bool:
        by_id = {f["id"]: f for f in recipe.faults}
        if not all(i in by_id and by_id[i]["duration_s"] >= d for i, d in self.needed.items()):
            return False
        last_heal = max((by_id[i]["at_s"] + by_id[i]["duration_s"] for i in self.needed), default=0)
        return recipe.time_limit_s >= last_heal

    def run_once(self, recipe: Recipe) -> tuple[bool, str]:
        self.runs += 1
        failed = self.could_fail(recipe) and self.rng.random() < self.p
        return failed, f"sim-run-{self.runs}"


@st.composite
def cases(draw):
    n = draw(st.integers(1, 8))
    durations = [draw(st.sampled_from([4.0, 8.0, 16.0])) for _ in range(n)]
    subset = draw(st.sets(st.integers(0, n - 1), min_size=1))
    needed = {i: draw(st.sampled_from([MIN_FAULT_S, durations[i] / 2, durations[i]]))
              for i in subset}  # fmt: skip
    p = draw(st.sampled_from([1.0, 0.7]))
    return n, durations, needed, p, draw(st.integers(0, 10_000))


@settings(max_examples=60, deadline=None)
@given(cases())
def test_the_search_finds_the_minimal_failing_faults_and_keeps_only_failures(case) -> None:
    n, durations, needed, p, seed = case
    start = recipe_of(n, durations)
    cluster = SimulatedCluster(needed, p, seed)
    search = Search(start, k=1, n=3)
    result = search.run(cluster.run_once, Budget(runs=2000, seconds=60))
    kept = [j for j in search.log if j.kept]
    # Every kept candidate really failed (its own runs say so); none is a passing one.
    assert all(any(r["failed"] for r in j.runs) for j in kept)
    assert cluster.could_fail(result)
    assert {f["id"] for f in result.faults} >= set(needed)
    if p == 1.0:  # deterministic: 1-minimal, so exactly the needed faults remain
        assert {f["id"] for f in result.faults} == set(needed)
        assert all(f["duration_s"] / 2 < max(needed[f["id"]], MIN_FAULT_S) for f in result.faults)
    # Bounded: no candidate judged twice, and at most cuts-per-recipe per kept step.
    keys = [j.key for j in search.log]
    assert len(keys) == len(set(keys))
    assert len(search.log) <= (len(kept) + 1) * (2 * n + 12)


def test_a_flaky_candidate_needs_k_of_n_failures_and_stops_early() -> None:
    start = recipe_of(2, [8.0, 8.0])
    outcomes = iter([False, True, True] * 100)
    runs = []

    def run_once(recipe: Recipe) -> tuple[bool, str]:
        runs.append(recipe.key())
        return next(outcomes), "r"

    search = Search(start, k=2, n=3)
    first_cut = next(cuts(start))
    verdict = search._judge(first_cut[0], first_cut[1], run_once, Budget(10, 60), lambda: False)
    assert verdict is not None and verdict.failing and len(verdict.runs) == 3
    # 0 of 2 after two runs can no longer reach k=2 of 3: stop there.
    search2 = Search(start, k=2, n=3)
    never = search2._judge("x", first_cut[1], lambda r: (False, "r"), Budget(10, 60), lambda: False)
    assert never is not None and not never.failing and len(never.runs) == 2


def test_a_resumed_search_does_not_run_a_judged_candidate_again() -> None:
    start = recipe_of(4, [8.0] * 4)
    cluster = SimulatedCluster({2: 8.0}, 1.0, 0)
    first = Search(start)
    first.run(cluster.run_once, Budget(runs=5, seconds=60))  # cut short by its budget
    assert first.stop_reason == "budget spent"
    saved = first.to_dict()
    spent = cluster.runs
    again = Search.resume(start, saved)
    again.run(cluster.run_once, Budget(runs=2000, seconds=60))
    judged_before = {j["key"] for j in saved["steps"] if j["complete"]}
    rerun = [j.key for j in again.log[len(saved["steps"]) :] if j.key in judged_before]
    assert rerun == [] and cluster.runs > spent
    assert {f["id"] for f in again.current.faults} == {2}


def test_the_time_limit_is_cut_to_just_after_the_last_kept_fault() -> None:
    start = recipe_of(3, [8.0, 8.0, 8.0])
    cluster = SimulatedCluster({0: 8.0}, 1.0, 0)
    search = Search(start)
    result = search.run(cluster.run_once, Budget(runs=2000, seconds=60))
    assert result.time_limit_s < start.time_limit_s
    assert result.size()["faults"] == 1 and result.size()["seconds"] >= 13.0


def test_the_budget_reads_as_a_duration_or_is_one_line() -> None:
    import pytest
    from kafka_chaos.harness.errors import ConfigError

    from kafka_chaos.shrink.cli import anomalies, parse_budget

    assert [parse_budget(t) for t in ("90m", "2h", "45s", "30")] == [5400, 7200, 45, 30]
    for bad in ("1x", "h", "-5m", ""):
        with pytest.raises(ConfigError, match="--budget"):
            parse_budget(bad)
    results = {"checks": {"acked-lost": {"count": 3, "severity": "error"},
                          "duplicate": {"count": 2, "severity": "warning"},
                          "lost-write": {"count": 0, "severity": "error"}}}  # fmt: skip
    assert anomalies(results) == {"acked-lost"}
    assert anomalies(results, errors_only=False) == {"acked-lost", "duplicate"}


def test_a_run_with_only_warnings_keeps_its_warnings_by_default() -> None:
    """An unclean election's loss is a warning (its doc allows it): a shrink of such a
    run keeps the warnings, never the info findings; errors win when there are any."""
    from kafka_chaos.shrink.cli import default_anomalies

    warned = {"checks": {"acked-lost": {"count": 3, "severity": "warning"},
                         "lost-write": {"count": 1, "severity": "warning"},
                         "duplicate": {"count": 2, "severity": "info"},
                         "unseen": {"count": 0, "severity": "warning"}}}  # fmt: skip
    assert default_anomalies(warned) == {"acked-lost", "lost-write"}
    failed = {"checks": {**warned["checks"], "poll-skip": {"count": 1, "severity": "error"}}}
    assert default_anomalies(failed) == {"poll-skip"}
    assert default_anomalies({"checks": {"duplicate": {"count": 2, "severity": "info"}}}) == set()


def test_only_the_chosen_kinds_of_cut_are_tried() -> None:
    import pytest
    from kafka_chaos.harness.errors import ConfigError

    from kafka_chaos.shrink.cli import parse_cuts
    from kafka_chaos.shrink.recipe import CUT_KINDS

    start = recipe_of(3, [8.0, 8.0, 8.0])
    assert {w.split(" ")[0] for w, _ in cuts(start, ("time",))} == {"end", "halve"}
    assert all(r.faults == start.faults for _, r in cuts(start, ("time",)))
    cluster = SimulatedCluster({0: 8.0}, 1.0, 0)
    search = Search(start, kinds=("time",))
    result = search.run(cluster.run_once, Budget(runs=50, seconds=60))
    assert result.faults == start.faults and result.time_limit_s < start.time_limit_s
    assert Search.resume(start, search.to_dict()).kinds == ("time",)
    assert parse_cuts("faults, time") == ("faults", "time") and CUT_KINDS[0] == "faults"
    with pytest.raises(ConfigError, match="--cuts: 'nodes'; known: faults, time"):
        parse_cuts("nodes")


def test_a_refused_fault_drop_is_not_run_again_after_a_smaller_cut() -> None:
    start = recipe_of(2, [8.0, 8.0])
    cluster = SimulatedCluster({0: 8.0, 1: 8.0}, 1.0, 0)  # both faults are needed
    search = Search(start)
    search.run(cluster.run_once, Budget(runs=2000, seconds=60))
    drops = [j.what for j in search.log if j.what.startswith("drop fault")]
    assert len(drops) == len(set(drops)) == 2, drops  # each judged once, though cuts were kept
    assert any(j.kept for j in search.log)


def test_a_duration_is_never_halved_below_the_time_its_fault_took_to_apply() -> None:
    from kafka_chaos.harness.spec import TestSpec

    options = TestSpec(name="t", seed=1, time_limit_s=60.0).to_dict()
    op = {"id": 0, "f": "unclean-election", "at_s": 5.0, "duration_s": 40.0,
          "target": "leader", "targets": ["n2"], "started_s": 5.0, "applied_s": 31.0}  # fmt: skip
    halved = [w for w, _ in cuts(Recipe.of(options, [op]), ("durations",))]
    assert halved == []  # 20 s < the 26 s it took to apply
    assert [w for w, _ in cuts(Recipe.of(options, [{**op, "applied_s": 9.0}]), ("durations",))]


def test_confirming_runs_are_saved_and_not_run_again_for_the_same_result(tmp_path) -> None:
    import json

    from kafka_chaos.shrink.cli import _confirm

    result = recipe_of(1, [8.0])
    log = tmp_path / "shrink.json"
    log.write_text(json.dumps({"steps": []}))
    outcomes = iter([True, False, True, True])
    ran: list[Recipe] = []

    def run_once(recipe: Recipe) -> tuple[bool, str]:
        ran.append(recipe)
        return next(outcomes), f"run-{len(ran)}"

    first = _confirm(result, run_once, 2, lambda: False, log)
    assert [r["failed"] for r in first] == [True, False] and len(ran) == 2
    saved = json.loads(log.read_text())["confirm"]
    assert saved["key"] == result.key() and saved["runs"] == first
    # Resumed with one more wanted: only the third runs; a stop ends it at once.
    assert [r["run"] for r in _confirm(result, run_once, 3, lambda: False, log)] == [
        "run-1",
        "run-2",
        "run-3",
    ]
    assert _confirm(recipe_of(2, [8.0, 8.0]), run_once, 3, lambda: True, log) == []
