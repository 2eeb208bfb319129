"""The collector policy: a full pass slower than the budget freezes its survivors, nothing else does;
the hook is installed once per process; priming's freeze collects the young cycles first."""

from __future__ import annotations

import gc
import time

import pytest

from controller.kube import collecting
from controller.kube.collecting import CollectorWatch, freeze_due


@pytest.mark.parametrize(("generation", "pause_s", "due"), [
    (2, 0.021, True),    # a full pass over the budget: its survivors would be walked again
    (2, 0.020, False),   # exactly the budget is within it
    (2, 0.001, False),   # a short full pass: nothing to gain
    (1, 5.0, False),     # young passes walk only the young: freezing would not shorten them
    (0, 5.0, False),
], ids=["slow-full-pass", "full-pass-at-budget", "quick-full-pass", "slow-gen1-pass", "slow-gen0-pass"])
def test_only_a_full_pass_longer_than_the_budget_freezes(generation: int, pause_s: float, due: bool) -> None:
    assert freeze_due(generation, pause_s, budget_s=0.02) is due


def test_the_hook_freezes_after_a_slow_full_pass_and_records_the_longest_pause(
        monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([0.0, 0.5, 1.0, 1.001, 2.0, 2.3])
    monkeypatch.setattr(time, "perf_counter", lambda: next(clock))
    freezes: list[int] = []
    monkeypatch.setattr(gc, "freeze", lambda: freezes.append(1))
    watch = CollectorWatch(budget_s=0.02)
    for generation in (2, 2, 1):
        watch("start", {"generation": generation})
        watch("stop", {"generation": generation, "collected": 0, "uncollectable": 0})
    assert freezes == [1] and watch.freezes == 1  # the 0.5 s full pass only
    assert watch.longest == pytest.approx([0.0, 0.3, 0.5])


def test_install_adds_one_hook_per_process() -> None:
    first = collecting.install()
    assert collecting.install() is first
    assert gc.callbacks.count(first) == 1


def test_freeze_young_collects_young_cycles_before_freezing(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    def collect(generation: int = 2) -> int:
        calls.append(f"collect {generation}")
        return 0
    monkeypatch.setattr(gc, "collect", collect)
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
    collecting.freeze_young()
    assert calls == ["collect 1", "freeze"]
