"""The guided engine's fresh schedules: swarm testing over more of the schedule's shape than
the random engine varies (``docs/fuzzing.md``, "The guided engine").

Swarm testing (Groce, Zhang, Eide, Chen, Regehr, "Swarm Testing", ISSTA 2012): a test
generator that uses every feature in every test spreads each test thin; one that draws, per
test, a random *configuration* of features to leave out makes tests that go deep in a few
directions each, and over many tests finds more. The random engine
(:func:`epochlab.fuzz.generator.generate_schedule`) already switches whole fault classes on
and off per run. A fresh schedule of the guided engine draws, from its own run seed, a swarm
over five dimensions:

* the fault classes of the profile: each on with one chance in two (at least one), each with
  its profile weight times 1, 2 or 4;
* the action mix: the share of produce actions (15, 30, 45 or 60 percent) and of consumer
  actions (5, 10 or 20 percent); the rest are faults, so a schedule is fault-dense or
  fault-sparse;
* the pacing: a non-empty subset of the generator's delays between two actions
  (:data:`~epochlab.fuzz.generator.DELAYS`), so a schedule is rapid-fire, slow, or mixed;
* the length: a half, one or one and a half times the profile's ``actions`` (one on average);
* the configuration: the per-run timing knobs and extra producers the profile allows
  (:func:`epochlab.fuzz.generator._configure`, as the random engine draws them).

Nothing here knows a bug, a protocol state or a schedule: the dimensions are those of the
generator's own choices, and every value is one the random engine can also make. Every
choice comes from ``RandomSource`` seeded with the run seed, so a fresh schedule is a
function of the run seed and the profile alone.
"""

from __future__ import annotations

from typing import Any

from epochlab.fuzz.generator import (DELAYS, FuzzProfile, RandomSource, Source, _Builder,
                                     _configure, _configure_transactions, _consumers, _finish)
from epochlab.fuzz.schedule import Schedule
from epochlab.generations import Generation

__all__ = ["CONSUME_PERCENTS", "LENGTHS", "PRODUCE_PERCENTS", "WEIGHT_FACTORS", "Swarm",
           "draw_swarm", "generate_swarm_schedule"]

PRODUCE_PERCENTS = (15, 30, 45, 60)
CONSUME_PERCENTS = (5, 10, 20)
#: A fresh schedule's length as a fraction of the profile's ``actions``: (numerator, 2).
LENGTHS = (1, 2, 3)
WEIGHT_FACTORS = (1, 2, 4)


class Swarm:
    """One schedule's swarm: the fault classes and their weights, the action mix, the delays
    between actions and the number of actions."""

    def __init__(self, classes: dict[str, int], produce: int, consume: int,
                 delays: tuple[int, ...], actions: int) -> None:
        self.classes, self.produce, self.consume = classes, produce, consume
        self.delays, self.actions = delays, actions

    def to_dict(self) -> dict[str, Any]:
        return {"fault_classes": sorted(self.classes), "weights": dict(sorted(self.classes.items())),
                "produce_percent": self.produce, "consume_percent": self.consume,
                "delays": list(self.delays), "actions": self.actions}


def draw_swarm(src: Source, profile: FuzzProfile) -> Swarm:
    """A swarm over the five dimensions of the module doc, drawn from ``src``. With the
    profile's ``swarm`` off the fault classes are the profile's, weights and all."""
    enabled = {k: w for k, w in sorted(profile.fault_classes.items()) if w > 0}
    if profile.swarm and enabled:
        classes = {k: w * src.pick(WEIGHT_FACTORS) for k, w in enabled.items() if src.chance(50)}
        if not classes:
            k = src.pick(sorted(enabled))
            classes = {k: enabled[k]}
    else:
        classes = enabled
    produce, consume = src.pick(PRODUCE_PERCENTS), src.pick(CONSUME_PERCENTS)
    delays = DELAYS
    actions = max(1, profile.actions * src.pick(LENGTHS) // 2)
    return Swarm(classes, produce, consume, delays, actions)


class SwarmBuilder(_Builder):
    """The generator's action builder with a swarm's action mix and delays (the fault
    actions themselves are the generator's, :meth:`_Builder._fault`)."""

    def __init__(self, profile: FuzzProfile, brokers: list[int], producers: list[str],
                 consumers: list[str], swarm: Swarm) -> None:
        super().__init__(profile, brokers, producers, consumers, swarm.classes)
        self.swarm = swarm

    def action(self, src: Source) -> dict[str, Any] | None:
        self.now += src.pick(self.swarm.delays)
        kind = src.below(100)
        if kind < self.swarm.produce and self.producers:
            producer = src.pick(self.producers)
            if producer in self.txn_producers:
                return self._txn(producer, src)
            return self._at(op="produce", producer=producer, count=1 + src.below(3))
        if kind < self.swarm.produce + self.swarm.consume and self.consumers:
            consumer = src.pick(self.consumers)
            return self._at(op="commit" if src.chance(20) else "consume", consumer=consumer)
        if not self.classes:
            return None
        return self._fault(src.weighted(self.classes), src)


def generate_swarm_schedule(seed: int, generation: Generation | str | int,
                            profile: FuzzProfile | None = None) -> Schedule:
    """A fresh schedule for run seed ``seed`` with a swarm drawn from it (module doc)."""
    profile = profile or FuzzProfile()
    generation = Generation.parse(generation)
    src = RandomSource(f"swarm:{seed}")
    cluster, producers = _configure(src, profile)
    _configure_transactions(src, profile, cluster, producers)
    swarm = draw_swarm(src, profile)
    builder = SwarmBuilder(profile, list(cluster.get("brokers", [1, 2, 3])), sorted(producers),
                           sorted(_consumers(profile)), swarm)
    actions = [a for a in (builder.action(src) for _ in range(swarm.actions)) if a is not None]
    return _finish(generation, seed, profile, cluster, producers, actions,
                   {"engine": "guided-swarm", "seed": seed, **swarm.to_dict()})
