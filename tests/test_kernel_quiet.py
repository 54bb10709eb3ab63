"""Quiet events (``epochlab.sim.kernel``): events that run only a client's code are marked,
and the fuzz executor skips its state check after them without changing any outcome."""

from __future__ import annotations

from typing import Any

import pytest

from epochlab.fuzz import FuzzProfile, execute, generate_schedule
from epochlab.fuzz import executor as executor_module
from epochlab.sim.kernel import Kernel


def test_timers_inherit_the_quietness_of_the_event_that_scheduled_them() -> None:
    k = Kernel(seed=1)
    seen: list[tuple[str, bool]] = []

    def loud() -> None:
        seen.append(("loud", k.last_quiet))
        k.schedule(1, lambda: seen.append(("child of loud", k.last_quiet)))

    def quiet() -> None:
        seen.append(("quiet", k.last_quiet))
        k.schedule(1, lambda: seen.append(("child of quiet", k.last_quiet)))
        k.schedule(2, lambda: seen.append(("explicitly loud", k.last_quiet)), quiet=False)

    k.schedule(1, loud)
    k.schedule(2, quiet, quiet=True)
    k.run_until(10)
    assert dict(seen) == {"loud": False, "child of loud": False, "quiet": True,
                          "child of quiet": True, "explicitly loud": False}
    k.schedule(1, lambda: None, quiet=True)
    k.run_until(20)
    assert k.last_quiet
    stops: list[bool] = []
    k.run_until(30, lambda: stops.append(k.last_quiet) or False)
    assert stops == [False]  # a new run_until starts loud: what happened before it is news


def test_deliveries_to_clients_are_quiet_and_to_brokers_loud() -> None:
    from epochlab.sim.cluster import Cluster
    from epochlab.sim.config import ClusterConfig, ProducerConfig

    c = Cluster(ClusterConfig.from_dict({"broker.startup.ms": [0, 0]}), "strict-min-isr", seed=2)
    p = c.producer("p", ProducerConfig(acks="all"))
    c.run_for(500)
    kinds: list[tuple[str, bool]] = []
    step = c.kernel.step

    def watched() -> bool:
        done = step()
        kinds.append(("delivered" if p.pending else "answered", c.kernel.last_quiet))
        return done
    c.kernel.step = watched  # type: ignore[method-assign]
    p.send(1)
    c.run_until(lambda _c: not p.pending, 1000)
    # the produce request reached a broker (loud); its answer reached the producer (quiet)
    assert kinds[0] == ("delivered", False)
    assert kinds[-1] == ("answered", True)


@pytest.mark.parametrize(("generation", "transactions"), [("strict-min-isr", False), ("strict-min-isr", True),
                                                          ("diverging-epoch", False), ("hw-truncation", False)])
def test_skipping_the_check_after_quiet_events_changes_no_run(generation: str, transactions: bool,
                                                              monkeypatch: Any) -> None:
    schedules = [generate_schedule(seed, generation, FuzzProfile(actions=60, transactions=transactions))
                 for seed in (31, 32, 33)]
    fast = [execute(s) for s in schedules]

    def always(self: Any, _cluster: Any) -> bool:
        self.checker.observe()
        return False

    def advance_observing_everything(self: Any, time_ms: int) -> None:
        if time_ms > self.cluster.now_ms:
            self.cluster.kernel.run_until(time_ms, lambda: always(self, self.cluster))
    monkeypatch.setattr(executor_module.Run, "_tick", always)  # the healing phase's waits
    monkeypatch.setattr(executor_module.Run, "advance_to", advance_observing_everything)
    slow = [execute(s) for s in schedules]
    for a, b in zip(fast, slow):
        assert a.history_jsonl == b.history_jsonl
        assert a.verdict_json() == b.verdict_json()
