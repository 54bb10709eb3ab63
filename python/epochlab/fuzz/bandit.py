"""A discounted Thompson-sampling bandit: how the guided engine shares its runs among fresh
schedules and its kinds of mutants (``docs/fuzzing.md``, "The guided engine").

Each *arm* is a way to make the next schedule; its reward is Bernoulli: did the run reach a
protocol-state feature no earlier run reached. The bandit keeps, per arm, a discounted count
of runs that did (``wins``) and did not (``losses``) and draws each choice by Thompson
sampling (Thompson 1933; Chapelle and Li, "An Empirical Evaluation of Thompson Sampling",
NIPS 2011): one sample from each arm's Beta(1 + wins, 1 + losses), the largest wins. The
counts are multiplied by :attr:`Bandit.discount` after every round, so an arm that stopped
paying loses its share (a fuzzer's yield per operator drifts as the corpus grows: MOpt,
USENIX Security 2019, schedules its mutation operators by their recent yield for this
reason). :attr:`Bandit.floor` percent of the choices are uniform over the arms, so no arm
starves and a drifting arm is noticed.

The bandit is a pure function of its counts and the ``random.Random`` it is handed: the same
counts and the same generator give the same choices (the guided engine's determinism
contract), and its counts are saved with the corpus.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from epochlab.errors import InvalidArgumentError

__all__ = ["Bandit"]


@dataclass
class Bandit:
    """Discounted Beta-Bernoulli Thompson sampling over ``arms`` (module doc)."""

    arms: tuple[str, ...]
    #: the factor applied to every count at the end of a round (1.0: no forgetting)
    discount: float = 0.9
    #: percent of choices drawn uniformly over the arms
    floor: int = 10
    wins: dict[str, float] = field(default_factory=dict)
    losses: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.arms:
            raise InvalidArgumentError("argument 'arms' = () is invalid: a bandit needs at least one arm",
                                       argument="arms", value=self.arms, reason="empty")
        if not 0.0 < self.discount <= 1.0:
            raise InvalidArgumentError(f"argument 'discount' = {self.discount!r} is outside (0, 1]",
                                       argument="discount", value=self.discount, domain="(0, 1]")
        if not 0 <= self.floor <= 100:
            raise InvalidArgumentError(f"argument 'floor' = {self.floor!r} is outside 0..100 percent",
                                       argument="floor", value=self.floor, domain="[0, 100]")
        for arm in self.arms:
            self.wins.setdefault(arm, 0.0)
            self.losses.setdefault(arm, 0.0)

    def choose(self, rng: random.Random, allowed: tuple[str, ...] | None = None) -> str:
        """An arm among ``allowed`` (default: all): uniform with :attr:`floor` percent chance,
        else the arm whose Beta(1 + wins, 1 + losses) sample is largest (the first on a tie)."""
        arms = self.arms if allowed is None else tuple(a for a in self.arms if a in allowed)
        if not arms:
            raise InvalidArgumentError(f"argument 'allowed' = {allowed!r} names no arm of {self.arms}",
                                       argument="allowed", value=allowed, domain=self.arms)
        if rng.randrange(100) < self.floor:
            return arms[rng.randrange(len(arms))]
        samples = [rng.betavariate(1.0 + self.wins[a], 1.0 + self.losses[a]) for a in arms]
        return arms[samples.index(max(samples))]

    def reward(self, arm: str, won: bool | float) -> None:
        """Count one run of ``arm``: it reached a new feature (``won`` True) or not (False);
        a value in [0, 1] counts that fraction of a win and the rest as a loss (a fractional
        Bernoulli outcome: the posterior stays a Beta)."""
        value = float(won)
        if not 0.0 <= value <= 1.0:
            raise InvalidArgumentError(f"argument 'won' = {won!r} is outside [0, 1]",
                                       argument="won", value=won, domain="[0, 1]")
        self.wins[arm] += value
        self.losses[arm] += 1.0 - value

    def end_round(self) -> None:
        """Forget a little: every count times :attr:`discount`."""
        for arm in self.arms:
            self.wins[arm] *= self.discount
            self.losses[arm] *= self.discount

    def mean(self, arm: str) -> float:
        """The posterior mean reward of ``arm``."""
        return (1.0 + self.wins[arm]) / (2.0 + self.wins[arm] + self.losses[arm])

    def to_dict(self) -> dict[str, Any]:
        return {"wins": dict(self.wins), "losses": dict(self.losses)}

    def load(self, data: dict[str, Any]) -> None:
        """Counts saved by :meth:`to_dict` (arms it lacks keep zero counts)."""
        for arm in self.arms:
            self.wins[arm] = float(data.get("wins", {}).get(arm, 0.0))
            self.losses[arm] = float(data.get("losses", {}).get(arm, 0.0))
