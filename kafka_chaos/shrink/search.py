"""Shrinking a flaky failure: one cut at a time, each judged by re-running it.

A candidate *fails* when at least ``k`` of ``n`` runs show the anomaly
(default 1 of 3): real clusters are flaky, so one passing run proves little.
Runs stop early once the verdict is certain (k failures seen, or too few runs
left to reach k).  The search keeps the first failing cut of the current
recipe and starts again from the largest cuts of the new one (skipping fault
drops already refused: ``_dropped_in_vain``); it ends when no cut fails, or
when the budget of runs or wall time is spent.

Every judged candidate goes into the log with each run's outcome, so a
search resumed from its log never runs a candidate twice, and a kept
candidate always carries the runs that show it failing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafka_chaos.shrink.recipe import Recipe, cuts

# One run of a recipe: (anomaly seen, the run's directory or a note).
RunOnce = Callable[[Recipe], tuple[bool, str]]


@dataclass
class Budget:
    runs: int
    seconds: float
    started: float = field(default_factory=time.monotonic)
    spent_runs: int = 0

    def left(self) -> bool:
        return self.spent_runs < self.runs and time.monotonic() - self.started < self.seconds


@dataclass
class Judged:
    key: str
    what: str  # the cut that made it, from the recipe before
    runs: list[dict[str, Any]]  # {"failed": bool, "run": dir or note}
    failing: bool
    kept: bool = False
    complete: bool = True  # False: the budget ran out before its verdict was certain

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Search:
    """The state of one shrink: its log of judged candidates, and where it stands."""

    start: Recipe
    k: int = 1
    n: int = 3
    log: list[Judged] = field(default_factory=list)
    current: Recipe | None = None
    stop_reason: str = ""
    kinds: tuple[str, ...] = ()  # the cut families to try (recipe.CUT_KINDS); () for all

    def __post_init__(self) -> None:
        if not 1 <= self.k <= self.n:
            raise ValueError(f"need 1 <= k <= n, got k={self.k} n={self.n}")
        self.current = self.current or self.start

    def judged(self, key: str) -> Judged | None:
        return next((j for j in self.log if j.key == key and j.complete), None)

    def run(
        self,
        run_once: RunOnce,
        budget: Budget,
        on_step: Callable[[Search], None] = lambda s: None,
        stop: Callable[[], bool] = lambda: False,
    ) -> Recipe:
        """Shrink until no cut fails, the budget is spent or ``stop()``; the smallest failing."""
        assert self.current is not None
        progress = True
        while progress:
            progress = False
            for what, candidate in cuts(self.current, self.kinds):
                if stop():
                    self.stop_reason = "stopped"
                    return self.current
                if not budget.left():
                    self.stop_reason = "budget spent"
                    return self.current
                if self._dropped_in_vain(what):
                    continue
                verdict = self._judge(what, candidate, run_once, budget, stop)
                on_step(self)
                if verdict is not None and verdict.failing:
                    verdict.kept = True
                    self.current = candidate
                    on_step(self)
                    progress = True
                    break
        self.stop_reason = "no smaller recipe fails"
        return self.current

    def _dropped_in_vain(self, what: str) -> bool:
        """Whether these faults were dropped before, from a larger recipe, and it passed.

        ddmin assumes monotony: if a run still needs a fault when it lasts
        longer or carries more load, it needs it in a smaller run too.  So a
        fault drop refused once is not tried again after a time, duration or
        load cut; without this, every kept cut re-ran every refused drop.
        """
        return what.startswith("drop fault") and any(
            j.what == what and j.complete and not j.failing for j in self.log
        )

    def _judge(
        self,
        what: str,
        candidate: Recipe,
        run_once: RunOnce,
        budget: Budget,
        stop: Callable[[], bool],
    ) -> Judged | None:
        known = self.judged(candidate.key())
        if known is not None:
            return known
        runs: list[dict[str, Any]] = []
        failures = 0
        while len(runs) < self.n and failures < self.k and self.k - failures <= self.n - len(runs):
            if stop() or not budget.left():
                self.log.append(Judged(candidate.key(), what, runs, False, complete=False))
                return None
            failed, where = run_once(candidate)
            budget.spent_runs += 1
            failures += failed
            runs.append({"failed": failed, "run": where})
        verdict = Judged(candidate.key(), what, runs, failures >= self.k)
        self.log.append(verdict)
        return verdict

    @classmethod
    def resume(cls, start: Recipe, saved: dict[str, Any]) -> Search:
        """A search picked up from its saved log: judged candidates are not run again."""
        log = [Judged(**j) for j in saved.get("steps", [])]
        current = Recipe(saved["result"]["options"]) if "result" in saved else None
        kinds = tuple(saved.get("kinds", ()))
        return cls(start, k=saved["k"], n=saved["n"], log=log, current=current, kinds=kinds)

    def to_dict(self) -> dict[str, Any]:
        assert self.current is not None
        return {
            "k": self.k,
            "n": self.n,
            "start": {"key": self.start.key(), "size": self.start.size()},
            "result": {
                "key": self.current.key(),
                "size": self.current.size(),
                "options": self.current.options,
            },
            "stop_reason": self.stop_reason,
            "kinds": list(self.kinds),
            "runs": sum(len(j.runs) for j in self.log),
            "steps": [j.to_dict() for j in self.log],
        }
