"""The scenario model: cluster and client configs, timed steps, expectations.

A :class:`Scenario` is plain, validated data. It is built either from a TOML file
(:mod:`epochlab.scenarios.loader`) or in Python with
:class:`~epochlab.scenarios.builder.ScenarioBuilder`; both paths go through the same
validation, so a scenario written in Python fails exactly like the equivalent file would
(``ScenarioError`` with ``where="<python>"``).

The vocabulary lives here, as tables: :data:`ACTIONS` (what a step may do and its parameters,
the step vocabulary of :mod:`epochlab.steps` as a scenario reads it), :data:`CONDITIONS` (what
``wait_until`` may wait for) and :data:`EXPECTATIONS` (what a scenario may claim about the
run). ``docs/scenario-format.md`` describes every entry. The file's pydantic model,
:func:`scenario_model`, is built from these tables.

Example::

    from epochlab.scenarios import ScenarioBuilder

    b = ScenarioBuilder("leader-failover", description="B takes over when A crashes")
    b.cluster(brokers=[1, 2, 3], min_insync_replicas=1)
    b.producer("p1", acks="all")
    b.step("produce", producer="p1", values=[1, 2, 3])
    b.step("crash", after_ms=100, broker=1)
    b.step("wait", ms=8000)
    b.expect("leader", broker=2, epoch=1)
    scenario = b.build()
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Any, Mapping

from epochlab.steps import Param, scenario_steps

__all__ = [
    "ACTIONS",
    "CONDITIONS",
    "EXPECTATIONS",
    "Param",
    "Scenario",
    "Step",
    "Expectation",
    "scenario_model",
]


def _p(name: str, type_: str, doc: str = "", *, required: bool = False, default: Any = None) -> Param:
    return Param(name, type_, required, default, doc)


#: action name -> parameters, from the step vocabulary (``epochlab.steps``: every step, the
#: time steps ``wait``, ``wait_until``, ``flush`` and ``note`` included, in a scenario's order
#: and with a scenario's parameters). Every step also takes ``at_ms`` or ``after_ms`` and
#: ``label``.
ACTIONS: dict[str, tuple[Param, ...]] = {s.name: s.scenario_spec() for s in scenario_steps()}

#: ``wait_until`` condition keys; all given keys must hold at once.
CONDITIONS: dict[str, Param] = {
    "leader": _p("leader", "broker", "this broker is the controller's leader"),
    "not_leader": _p("not_leader", "broker", "some live broker other than this one leads"),
    "leader_epoch_at_least": _p("leader_epoch_at_least", "int"),
    "offline": _p("offline", "bool", "the partition has (true) / has not (false) a leader"),
    "isr": _p("isr", "brokers", "the controller's ISR, as a set"),
    "high_watermark_at_least": _p("high_watermark_at_least", "int", "the leader's HW"),
    "leo": _p("leo", "replica_offset", "[broker, offset]: this replica's log ends at offset"),
    "in_sync": _p("in_sync", "bool", "every live replica has the leader's LEO and HW"),
    "sends_done": _p("sends_done", "producer", "every send of this producer has an outcome"),
    "transactions_done": _p("transactions_done", "producer",
                            "every transaction this producer began has finished"),
}

#: expectation kind -> parameters. Every expectation also takes ``generations``,
#: ``after_step`` (state kinds only, see :data:`STATE_KINDS`) and ``description``.
EXPECTATIONS: dict[str, tuple[Param, ...]] = {
    "lost": (
        _p("values", "values", required=True),
        _p("acked", "bool", "also require that each value had been acknowledged"),
    ),
    "durable": (_p("producer", "producer", "default: every producer"),),
    "present": (
        _p("values", "values", required=True),
        _p("offsets", "offsets", "the offset of each value, same length as values"),
        _p("brokers", "brokers", "check these replicas instead of the leader"),
    ),
    "duplicated": (_p("values", "values", required=True),),
    "not_duplicated": (_p("values", "values", "default: every value sent"),),
    "truncated": (
        _p("broker", "broker", required=True),
        _p("values", "values", required=True),
    ),
    "log": (
        _p("values", "values", "exact record values, in offset order", required=True),
        _p("broker", "broker", "default: the leader"),
    ),
    "consumer_saw": (
        _p("consumer", "consumer", required=True),
        _p("values", "values"),
        _p("offsets", "offsets"),
        _p("records", "records"),
    ),
    "consumer_did_not_see": (
        _p("consumer", "consumer", required=True),
        _p("values", "values"),
        _p("offsets", "offsets"),
    ),
    "consumer_saw_twice": (
        _p("consumer", "consumer", required=True),
        _p("values", "values", required=True),
    ),
    "consumer_within_hw": (_p("consumer", "consumer", required=True),),
    "consumer_fetched_from": (
        _p("consumer", "consumer", "a consumer with a client.rack", required=True),
        _p("brokers", "brokers", "brokers it fetched from, in this order (others may come between)",
           required=True),
    ),
    "consumer_polled": (
        _p("consumer", "consumer", required=True),
        _p("poll", "pos_int", "1 = the consumer's first poll", required=True),
        _p("values", "values", "exactly these values, in order", required=True),
    ),
    "listed_offsets": (
        _p("consumer", "consumer", required=True),
        _p("offsets", "answers", "the offsets its list_offsets steps were answered, in order "
           "(-1: no record at or after the timestamp)", required=True),
    ),
    "consumer_saw_truncated": (
        _p("consumer", "consumer", required=True),
        _p("values", "values", "default: any"),
    ),
    "leader": (
        _p("broker", "broker"),
        _p("epoch", "int"),
    ),
    "offline": (_p("value", "bool", default=True),),
    "isr": (_p("brokers", "brokers", required=True),),
    "hw": (
        _p("value", "int", required=True),
        _p("broker", "broker", "default: the leader"),
    ),
    "leo": (
        _p("value", "int", required=True),
        _p("broker", "broker", "default: the leader"),
    ),
    "logs_match": (_p("brokers", "brokers", "default: every replica"),),
    "logs_diverge": (_p("brokers", "brokers", "default: every replica"),),
    "unavailable_ms_between": (
        _p("min", "int", required=True),
        _p("max", "int"),
        _p("measure", "measure", default="longest"),
    ),
    "acked": (
        _p("producer", "producer", required=True),
        _p("values", "values", required=True),
        _p("offsets", "offsets"),
    ),
    "not_acked": (
        _p("producer", "producer", required=True),
        _p("values", "values", required=True),
    ),
    "error_seen": (
        _p("producer", "producer", required=True),
        _p("error", "errors", "one error name, or a list of acceptable ones", required=True),
        _p("values", "values", "only sends of these values count"),
    ),
    "inconsistent_offsets": (_p("offsets", "offsets", "default: any offset"),),
    "consistent_offsets": (),
    "txn_outcome": (
        _p("producer", "producer", required=True),
        _p("values", "values", "the values sent in the transaction", required=True),
        _p("outcome", "str", '"committed", "aborted" or "fenced"', required=True),
    ),
    "lso": (
        _p("value", "int", required=True),
        _p("broker", "broker", "default: the leader"),
    ),
    "event_seen": (
        _p("text", "str", "a substring of an engine event message", required=True),
        _p("event_kind", "str", "the event's kind (crash, election, replica, ...)"),
    ),
}

#: kinds evaluated against one state snapshot (the final one, or the one after ``after_step``).
STATE_KINDS = frozenset(
    {"lost", "durable", "present", "duplicated", "not_duplicated", "log", "leader", "offline", "isr",
     "hw", "leo", "lso", "logs_match", "logs_diverge"}
)


@cache
def scenario_model() -> Any:
    """The pydantic model of a scenario file (``docs/schemas/scenario.schema.json``): a step
    model per entry of :data:`ACTIONS`, an expectation model per entry of :data:`EXPECTATIONS`,
    a ``wait_until`` condition of :data:`CONDITIONS`."""
    from typing import Annotated, Union

    from pydantic import Field, StrictInt, create_model

    from epochlab.formats import (MAX_ACTIONS, TAGS, Ms, Name, Settings, Strict, Value, param_fields,
                                  tagged)

    def table(entries: Mapping[str, Any]) -> dict[str, dict[str, tuple[str, bool]]]:
        return {name: {p.name: (p.type, p.required) for p in params} for name, params in entries.items()}

    condition = create_model("WaitCondition", __base__=Strict,
                             **param_fields({p.name: (p.type, False) for p in CONDITIONS.values()}))
    step = tagged("ScenarioStep", "action", table(ACTIONS),
                  {"at_ms": (Ms | None, None), "after_ms": (Ms | None, None),
                   "label": (Name | None, None)}, {"condition": condition})
    expect = tagged("ScenarioExpectation", "kind", table(EXPECTATIONS),
                    {"generations": (Annotated[list[Name], Field(max_length=100)] | None, None),
                     "after_step": (TAGS["step_ref"] | None, None),
                     "description": (TAGS["str"] | None, None),
                     "from_release": (TAGS["str"] | None, None),
                     "before_release": (TAGS["str"] | None, None)})
    return create_model(
        "Scenario", __base__=Strict,
        __doc__="An epochlab scenario (TOML; docs/scenario-format.md).",
        name=(Name, ...),
        description=(TAGS["str"] | None, None),
        source=(TAGS["str"] | None, None),
        generations=(Annotated[list[Union[Name, StrictInt]], Field(min_length=1, max_length=100)] | None, None),
        seed=(Value | None, None),
        settle_ms=(Ms | None, None),
        cluster=(Settings | None, None),
        producers=(dict[Name, Settings] | None, None),
        consumers=(dict[Name, Settings] | None, None),
        steps=(Annotated[list[step], Field(max_length=MAX_ACTIONS)] | None, None),
        expect=(Annotated[list[expect], Field(max_length=MAX_ACTIONS)] | None, None),
    )


@dataclass(frozen=True)
class Step:
    """One timed step. ``at_ms`` (absolute) or ``after_ms`` (after the previous step finished);
    neither means ``after_ms = 0``. ``params`` holds the action's parameters with defaults
    filled in."""

    index: int
    action: str
    params: Mapping[str, Any]
    at_ms: int | None = None
    after_ms: int | None = None
    label: str | None = None

    def describe(self) -> str:
        """A short human text, e.g. ``crash(broker=1, lose_unflushed=true)``."""
        if self.action == "note":
            return f"note: {self.params['text']}"
        shown = [f"{k}={_fmt(v)}" for k, v in self.params.items() if v is not None]
        return f"{self.action}({', '.join(shown)})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "action": self.action,
            "params": dict(self.params),
            "at_ms": self.at_ms,
            "after_ms": self.after_ms,
            "label": self.label,
        }


@dataclass(frozen=True)
class Expectation:
    """A claim about the run. ``generations`` (labels) limits where it is checked (``None``:
    everywhere the scenario runs); ``after_step`` evaluates a state kind after that step.
    ``from_release`` / ``before_release`` (``"X.Y.Z"``) limit it further to runs of Kafka
    releases from / before that one, where a rule changed inside a generation (KAFKA-7414's
    halting follower is in 2.0.0, not 2.0.1): the run's release is its ``kafka.release`` (a
    live run's: the cluster's), and a model run without one follows each generation's newest
    release (:meth:`~epochlab.generations.Generation.precedes`)."""

    index: int
    kind: str
    params: Mapping[str, Any]
    generations: tuple[str, ...] | None = None
    after_step: int | None = None
    description: str | None = None
    from_release: str | None = None
    before_release: str | None = None

    def applies_to(self, generation_label: str, release: tuple[int, ...] | None = None) -> bool:
        """Whether the expectation is judged in a run of ``generation_label`` that models
        Kafka ``release`` (``None``: the generation's newest)."""
        if self.generations is not None and generation_label not in self.generations:
            return False
        if self.from_release is None and self.before_release is None:
            return True
        from epochlab.generations import Generation, parse_release

        generation = Generation.parse(generation_label)

        def before(bound: str) -> bool:
            limit = parse_release(bound)
            assert limit is not None, bound  # checked when the scenario was loaded
            return generation.precedes(limit) if release is None else release < limit

        return ((self.from_release is None or not before(self.from_release))
                and (self.before_release is None or before(self.before_release)))

    def describe(self) -> str:
        if self.description:
            return self.description
        shown = [f"{k}={_fmt(v)}" for k, v in self.params.items() if v is not None]
        where = f" after step {self.after_step + 1}" if self.after_step is not None else ""
        return f"{self.kind}({', '.join(shown)}){where}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "kind": self.kind,
            "params": dict(self.params),
            "generations": list(self.generations) if self.generations is not None else None,
            "after_step": self.after_step,
            "description": self.description,
            "from_release": self.from_release,
            "before_release": self.before_release,
        }


@dataclass(frozen=True)
class Scenario:
    """A validated scenario. ``cluster``, ``producers`` and ``consumers`` keep the config
    mappings as written (Kafka dotted names allowed); the runner turns them into
    ``epochlab.sim.config`` objects. ``generations`` are labels, oldest first."""

    name: str
    description: str
    source: str | None
    generations: tuple[str, ...]
    seed: int
    cluster: Mapping[str, Any]
    producers: Mapping[str, Mapping[str, Any]]
    consumers: Mapping[str, Mapping[str, Any]]
    steps: tuple[Step, ...]
    expectations: tuple[Expectation, ...]
    settle_ms: int = 0
    where: str = "<python>"
    text: str | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "source": self.source,
            "generations": list(self.generations),
            "seed": self.seed,
            "cluster": dict(self.cluster),
            "producers": {k: dict(v) for k, v in self.producers.items()},
            "consumers": {k: dict(v) for k, v in self.consumers.items()},
            "settle_ms": self.settle_ms,
            "steps": [s.to_dict() for s in self.steps],
            "expect": [e.to_dict() for e in self.expectations],
        }


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={_fmt(v)}" for k, v in value.items()) + "}"
    return str(value)
