"""The step vocabulary: every step a schedule or a scenario can take, one entry each.

A *step* is one thing a run does at one moment: a client operation (``produce``, ``consume``,
``begin_transaction``, ...), a fault (``crash``, ``partition``, ``set_link``, ...), or, in
scenarios only, a *time step* that lets time pass or annotates the run (``wait``,
``wait_until``, ``flush``, ``note``). Its entry in :data:`STEPS` says what every layer above
needs to know about it:

``params``
    its parameters (:class:`Param`: name, type tag of ``epochlab.formats.TAGS``, required,
    default, doc), in the order a schedule lists them;
``fault_class``
    its class in reports (``client``, ``crash``, ``partition``, ``link``, ...);
``version``
    the schedule format version that introduced it (``None``: a scenario-only time step);
``sim``
    the simulator action: a :class:`Call` (a method of the ``Cluster``, or of the producer or
    consumer the step names, with the step's parameters as arguments) or a function of the run
    and the parameters. The run is anything with ``cluster``, ``producers`` and ``consumers``
    (the executor's ``Run``, the scenario runner's driver). A time step has none: the scenario
    runner performs it;
``live``
    the name of the function of ``epochlab.kafka.runs.driver`` that performs it on a live
    Kafka cluster, or :class:`Unmapped` with the reason it cannot be (a reason that depends on
    the parameters, such as ``crash`` with ``lose_unflushed``, is
    ``epochlab.kafka.runs.scenario.unmappable``'s);
``drawn_by``
    the random generator's fault classes (:data:`SWARM_CLASSES`) whose draws make it, or
    :data:`CLIENT` for the client operations every run draws; ``()`` declares that no
    generator draws it;
``shrinks``
    whether the shrinker has simplifications of its parameters (``epochlab.fuzz.shrink``'s
    ``SIMPLIFICATIONS``);
``ends``
    for a fault that lasts until undone, the action that ends it (the guided engine's
    ``end-fault`` mutation gives a fault a duration with it);
``scenario_params``
    the parameters a scenario step takes, in the order a scenario lists them, when they are
    not ``params`` (a scenario's links never reorder; ``produce`` lists ``values`` first);
``example``
    the parameters of a small valid instance (default: a sample of each required parameter's
    type), for the tests and the docs.

Readers: ``fuzz.schedule`` (``OPS``, ``V2_OPS``, ``FAULT_CLASS``), ``fuzz.executor``
(``Run.apply``), ``fuzz.generator`` (``FAULT_CLASSES``, ``TXN_FAULT_CLASSES``), ``fuzz.guided``
(``FAULTS`` and their ends), ``fuzz.convert`` (the time steps), ``fuzz.shrink`` (checked
against ``shrinks``), ``scenarios.model`` (``ACTIONS``), ``scenarios.runner``,
``kafka.runs.driver`` (``ACTIONS``), ``kafka.runs.scenario`` (the unmapped steps) and
``campaigns.grid`` (``FAULT_KINDS``, from :data:`CAMPAIGN_FAULTS`). ``tests/test_steps.py``
holds every entry to all of them; ``docs/architecture.md`` ("A fault step") walks through
adding one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["CAMPAIGN_FAULTS", "CLIENT", "SCENARIO_ORDER", "STEPS", "SWARM_CLASSES", "Call",
           "CampaignFault", "Param", "Step", "SwarmClass", "Unmapped", "schedule_steps",
           "scenario_steps", "time_steps"]


@dataclass(frozen=True)
class Param:
    """One parameter of a step, a ``wait_until`` condition or an expectation.

    ``type`` is a tag the validators check: ``int`` (>= 0), ``pos_int`` (>= 1), ``bool``,
    ``str``, ``fraction`` (0.0 ..= 1.0), ``broker`` (an id of the cluster), ``brokers`` (list of
    them), ``node`` (broker id, ``"controller"``, ``"coordinator"`` or a client name),
    ``groups`` (list of lists of nodes), ``delay`` (``[lo, hi]`` ms), ``values`` (list of record
    values, ints >= 0), ``spec`` (``"latest"``, ``"earliest"`` or a timestamp), ``offsets``
    (list of ints >= 0), ``records`` (list of ``[offset, value]``), ``producer`` / ``consumer``
    (a declared client name), ``errors`` (an error name or a list of them), ``condition`` (a
    table of ``wait_until`` conditions), ``step_ref`` (a step label or 0-based index),
    ``measure`` (``"longest"`` or ``"total"``), ``replica_offset`` (``[broker, offset]``).
    """

    name: str
    type: str
    required: bool = False
    default: Any = None
    doc: str = ""


def _p(name: str, type_: str, doc: str = "", *, required: bool = False, default: Any = None) -> Param:
    return Param(name, type_, required, default, doc)


@dataclass(frozen=True)
class Call:
    """A simulator action that is one method call: ``Call("crash", ("broker",),
    (("lose_unflushed", "lose_unflushed"),))`` is ``cluster.crash(p["broker"],
    lose_unflushed=p["lose_unflushed"])``. ``on`` is ``"cluster"``, or ``"producer"``
    (``"consumer"``): the producer (consumer) the step's parameter of that name names.
    Returns what the method returns."""

    method: str
    args: tuple[str, ...] = ()
    kwargs: tuple[tuple[str, str], ...] = ()  # (keyword, parameter)
    on: str = "cluster"

    def __call__(self, run: Any, params: Mapping[str, Any]) -> Any:
        if self.on == "cluster":
            target = run.cluster
        elif self.on == "producer":
            target = run.producers[params["producer"]]
        else:
            target = run.consumers[params["consumer"]]
        return getattr(target, self.method)(*(params[a] for a in self.args),
                                            **{k: params[v] for k, v in self.kwargs})


def _cluster(method: str, *args: str, **kwargs: str) -> Call:
    return Call(method, args, tuple(kwargs.items()))


def _producer(method: str, *args: str) -> Call:
    return Call(method, args, on="producer")


def _consumer(method: str, *args: str) -> Call:
    return Call(method, args, on="consumer")


@dataclass(frozen=True)
class Unmapped:
    """A step a live Kafka cluster cannot take, and why."""

    reason: str


#: ``drawn_by`` of the client operations: the generator draws them in every run, outside the
#: fault classes (``epochlab.fuzz.generator``, ``_Builder.action``).
CLIENT = "client"


@dataclass(frozen=True)
class Step:
    """One entry of :data:`STEPS` (module doc)."""

    name: str
    params: tuple[Param, ...]
    fault_class: str | None
    version: int | None
    sim: Callable[[Any, Mapping[str, Any]], Any] | None
    live: str | Unmapped
    drawn_by: tuple[str, ...]
    shrinks: bool
    ends: Callable[[Mapping[str, Any], Mapping[str, Any]], dict[str, Any]] | None = None
    scenario_params: tuple[str, ...] | None = None
    example: Mapping[str, Any] | None = None
    doc: str = ""

    @property
    def time_only(self) -> bool:
        """A scenario-only time step (no schedule has it)."""
        return self.version is None

    def schedule_spec(self) -> dict[str, tuple[str, bool, Any]]:
        """Its parameters as a schedule reads them: ``name -> (type tag, required, default)``."""
        return {p.name: (p.type, p.required, p.default) for p in self.params}

    def scenario_spec(self) -> tuple[Param, ...]:
        """Its parameters as a scenario reads them, in a scenario's order."""
        if self.scenario_params is None:
            return self.params
        by_name = {p.name: p for p in self.params}
        return tuple(by_name[name] for name in self.scenario_params)

    def run(self, run: Any, params: Mapping[str, Any]) -> Any:
        """Perform the step on the simulator (``run``: ``cluster``, ``producers``,
        ``consumers``); a parameter the caller's format lacks takes its default."""
        if self.sim is None:
            raise NotImplementedError(f"{self.name} is a scenario time step: the scenario runner performs it")
        if any(p.name not in params for p in self.params):
            params = {p.name: p.default for p in self.params} | dict(params)
        return self.sim(run, params)


# -- the simulator actions that are more than one call --------------------------------------

def _produce(run: Any, p: Mapping[str, Any]) -> None:
    # ``values`` resolved: a schedule's ``count`` by the executor, a scenario's by its loader
    run.producers[p["producer"]].send_many(list(p["values"]))


def _partition(run: Any, p: Mapping[str, Any]) -> None:
    run.cluster.partition([list(g) for g in p["groups"]])


def _set_link(run: Any, p: Mapping[str, Any]) -> None:
    delay = p["delay_ms"]
    run.cluster.set_link(p["a"], p["b"], delay_ms=tuple(delay) if delay is not None else None,
                         drop=p["drop"], duplicate=p["duplicate"], reorder=p["reorder"])


# -- the ends of lasting faults (schedule action dicts, without ``at_ms``) -------------------

def _restart_broker(fault: Mapping[str, Any], _cluster: Mapping[str, Any]) -> dict[str, Any]:
    return {"op": "restart", "broker": fault["broker"]}


def _heal(_fault: Mapping[str, Any], _cluster: Mapping[str, Any]) -> dict[str, Any]:
    return {"op": "heal"}


def _unslow(fault: Mapping[str, Any], _cluster: Mapping[str, Any]) -> dict[str, Any]:
    return {"op": "slow_follower", "broker": fault["broker"], "extra_delay_ms": 0}


def _restore_link(fault: Mapping[str, Any], cluster: Mapping[str, Any]) -> dict[str, Any]:
    """The link back to the cluster's delays (``cluster``: the schedule's settings), nothing lost."""
    from epochlab.sim.config import ClusterConfig

    config = ClusterConfig.from_dict(cluster, "cluster")
    delay = config.controller_delay_ms if "controller" in (fault["a"], fault["b"]) \
        else config.network_delay_ms
    return {"op": "set_link", "a": fault["a"], "b": fault["b"], "delay_ms": list(delay),
            "drop": 0.0, "duplicate": 0.0, "reorder": False}


_COORDINATOR = Unmapped("the group/transaction coordinator is a broker chosen by Kafka, not a node")

#: Every step, in the order a schedule lists them (``docs/schemas/schedule.schema.json``),
#: then the scenario-only time steps.
_ENTRIES: tuple[Step, ...] = (
    Step("produce", (_p("producer", "producer", "who sends", required=True),
                     _p("count", "pos_int", "send this many fresh values (next unused integers)"),
                     _p("values", "values", "record values to send, in order")),
         fault_class="client", version=1, sim=_produce, live="produce", drawn_by=(CLIENT,),
         shrinks=True, scenario_params=("producer", "values", "count"),
         example={"producer": "p1", "count": 2},
         doc="exactly one of count and values"),
    Step("consume", (_p("consumer", "consumer", "one poll", required=True),),
         fault_class="client", version=1, sim=_consumer("poll"), live="consume",
         drawn_by=(CLIENT,), shrinks=False),
    Step("commit", (_p("consumer", "consumer", required=True),),
         fault_class="client", version=1, sim=_consumer("commit"), live="commit",
         drawn_by=(CLIENT,), shrinks=False),
    Step("crash", (_p("broker", "broker", required=True),
                   _p("lose_unflushed", "bool", "power loss: the unflushed suffix is gone", default=False)),
         fault_class="crash", version=1,
         sim=_cluster("crash", "broker", lose_unflushed="lose_unflushed"), live="crash",
         drawn_by=("crash", "lossy-crash"), shrinks=True, ends=_restart_broker),
    Step("restart", (_p("broker", "broker", required=True),
                     _p("startup_ms", "int", "this restart's startup time (process start and log "
                        "loading), as a live run measured it; default: drawn from "
                        "broker_startup_ms", default=None)),
         fault_class="crash", version=1, sim=_cluster("restart", "broker", startup_ms="startup_ms"),
         live="restart",
         drawn_by=("crash", "lossy-crash"), shrinks=False),
    Step("partition", (_p("groups", "groups", "nodes that can still talk to each other", required=True),),
         fault_class="partition", version=1, sim=_partition, live="partition",
         drawn_by=("partition",), shrinks=True, ends=_heal),
    Step("heal", (), fault_class="partition", version=1, sim=_cluster("heal"), live="heal",
         drawn_by=("partition",), shrinks=False),
    Step("isolate", (_p("broker", "broker", required=True),),
         fault_class="partition", version=1, sim=_cluster("isolate", "broker"), live="isolate",
         drawn_by=("partition",), shrinks=False, ends=_heal),
    Step("slow_follower", (_p("broker", "broker", required=True),
                           _p("extra_delay_ms", "int", required=True)),
         fault_class="slow", version=1, sim=_cluster("slow_follower", "broker", "extra_delay_ms"),
         live="slow_follower",
         drawn_by=("slow",), shrinks=True, ends=_unslow),
    Step("set_link", (_p("a", "node", required=True),
                      _p("b", "node", required=True),
                      _p("delay_ms", "delay", "[lo, hi] per message"),
                      _p("drop", "fraction", default=0.0),
                      _p("duplicate", "fraction", default=0.0),
                      _p("reorder", "bool", "messages on the link may overtake each other", default=False)),
         fault_class="link", version=1, sim=_set_link, live="set_link",
         drawn_by=("controller-link", "broker-link", "txn-delay"), shrinks=True, ends=_restore_link,
         scenario_params=("a", "b", "delay_ms", "drop", "duplicate"),
         example={"a": 1, "b": 2, "delay_ms": [1, 5]}),
    Step("elect", (_p("broker", "broker", required=True),
                   _p("unclean", "bool", default=False)),
         fault_class="election", version=1, sim=_cluster("elect", "broker", unclean="unclean"),
         live="elect", drawn_by=("election", "unclean"), shrinks=True),
    Step("elect_preferred", (), fault_class="election", version=1,
         sim=_cluster("elect_preferred_leader"), live="elect_preferred", drawn_by=("election",),
         shrinks=False),
    Step("controlled_shutdown", (_p("broker", "broker", required=True),),
         fault_class="shutdown", version=1, sim=_cluster("controlled_shutdown", "broker"),
         live="controlled_shutdown", drawn_by=("shutdown",), shrinks=False, ends=_restart_broker),
    Step("restart_producer", (_p("producer", "producer", required=True),),
         fault_class="client-restart", version=1, sim=_producer("restart"), live="restart_producer",
         drawn_by=("client-restart",), shrinks=False),
    Step("crash_consumer", (_p("consumer", "consumer", required=True),),
         fault_class="client-restart", version=1, sim=_consumer("crash"), live="crash_consumer",
         drawn_by=("client-restart",), shrinks=False),
    Step("restart_consumer", (_p("consumer", "consumer", required=True),),
         fault_class="client-restart", version=1, sim=_consumer("restart"), live="restart_consumer",
         drawn_by=("client-restart",), shrinks=False),
    Step("begin_transaction", (_p("producer", "producer", "needs transactional.id", required=True),),
         fault_class="client", version=2, sim=_producer("begin_transaction"),
         live="begin_transaction", drawn_by=(CLIENT,), shrinks=False, example={"producer": "t1"}),
    Step("commit_transaction", (_p("producer", "producer", "asynchronous: see transactions_done",
                                   required=True),),
         fault_class="client", version=2, sim=_producer("commit_transaction"),
         live="commit_transaction", drawn_by=(CLIENT,), shrinks=False, example={"producer": "t1"}),
    Step("abort_transaction", (_p("producer", "producer", required=True),),
         fault_class="client", version=2, sim=_producer("abort_transaction"),
         live="abort_transaction", drawn_by=(CLIENT,), shrinks=False, example={"producer": "t1"}),
    Step("crash_coordinator", (), fault_class="coordinator", version=2,
         sim=_cluster("crash_coordinator"), live=_COORDINATOR, drawn_by=("coordinator",),
         shrinks=False),
    Step("restart_coordinator", (), fault_class="coordinator", version=2,
         sim=_cluster("restart_coordinator"), live=_COORDINATOR, drawn_by=("coordinator",),
         shrinks=False),
    Step("list_offsets", (_p("consumer", "consumer", "who asks the leader (the answer comes later)",
                             required=True),
                          _p("spec", "spec", '"latest" (the HW; the LSO for read_committed), "earliest", '
                             'or a timestamp in ms: the first offset whose record (stamped with the '
                             'leader\'s append time) is at least that old', default="latest")),
         fault_class="list-offsets", version=2, sim=_consumer("list_offsets", "spec"),
         live="list_offsets", drawn_by=("list-offsets", "list-offsets-time"), shrinks=False),
    Step("controller_failover", (), fault_class="controller-failover", version=2,
         sim=_cluster("controller_failover"),
         live=Unmapped("not mapped yet: it needs a controller quorum and a kill of its active member "
                       "(a KRaft failover; the model's step is ZooKeeper's in G0-G4)"),
         drawn_by=("controller-failover",), shrinks=False),
    # scenario-only time steps: the scenario runner performs them
    Step("flush", (_p("producer", "producer", required=True),
                   _p("timeout_ms", "int", "give up after this long", default=30000)),
         fault_class=None, version=None, sim=None, live="flush", drawn_by=(), shrinks=False),
    Step("wait", (_p("ms", "int", "let virtual time pass", required=True),),
         fault_class=None, version=None, sim=None, live="wait", drawn_by=(), shrinks=False),
    Step("wait_until", (_p("condition", "condition", required=True),
                        _p("timeout_ms", "pos_int", required=True),
                        _p("required", "bool", "a timeout fails the run's verdict", default=True)),
         fault_class=None, version=None, sim=None, live="wait_until", drawn_by=(), shrinks=False,
         example={"condition": {"leader": 1}, "timeout_ms": 10}),
    Step("note", (_p("text", "str", required=True),),
         fault_class=None, version=None, sim=None, live="note", drawn_by=(), shrinks=False),
)

#: step name -> entry, in registry order.
STEPS: dict[str, Step] = {s.name: s for s in _ENTRIES}

#: The order the scenario vocabulary has always listed its steps in (the ``oneOf`` of
#: ``docs/schemas/scenario.schema.json``, the loader's "one of ..." message); a step
#: registered after these follows them in registry order.
SCENARIO_ORDER: tuple[str, ...] = (
    "produce", "flush", "consume", "commit", "list_offsets", "crash", "restart", "partition",
    "heal", "isolate", "slow_follower", "set_link", "elect", "elect_preferred",
    "controlled_shutdown", "wait", "wait_until", "restart_producer", "begin_transaction",
    "commit_transaction", "abort_transaction", "crash_coordinator", "restart_coordinator",
    "controller_failover", "crash_consumer", "restart_consumer", "note")


def schedule_steps() -> list[Step]:
    """The steps a schedule can take, in registry order."""
    return [s for s in STEPS.values() if not s.time_only]


def time_steps() -> list[Step]:
    """The scenario-only time steps, in registry order."""
    return [s for s in STEPS.values() if s.time_only]


def scenario_steps() -> list[Step]:
    """Every step, in the scenario vocabulary's order (:data:`SCENARIO_ORDER`)."""
    first = [STEPS[name] for name in SCENARIO_ORDER if name in STEPS]
    return first + [s for s in STEPS.values() if s.name not in SCENARIO_ORDER]


@dataclass(frozen=True)
class SwarmClass:
    """A fault class of the random generator: swarm testing switches it on or off per run
    (``epochlab.fuzz.generator``); ``weight`` says how often an action is drawn from it when
    on (0: off unless a profile turns it on; a class of weight 0 takes no random draw, so the
    schedules of earlier builds are drawn the same), ``transactions_weight`` its weight in the
    transactions profile."""

    name: str
    weight: int
    doc: str
    transactions_weight: int | None = None


#: The generator's fault classes, in the order profiles list them.
SWARM_CLASSES: tuple[SwarmClass, ...] = (
    SwarmClass("crash", 6, "crash without loss, restart"),
    SwarmClass("lossy-crash", 2, "crash losing the unflushed tail"),
    SwarmClass("partition", 3, "partition / isolate / heal"),
    SwarmClass("controller-link", 3, "controller channel delayed or cut (ordered, never duplicated)"),
    SwarmClass("broker-link", 3, "fetch traffic delayed, dropped, reordered"),
    SwarmClass("slow", 1, "slow follower"),
    SwarmClass("election", 2, "operator elections, preferred election (clean)"),
    SwarmClass("shutdown", 1, "controlled shutdown"),
    SwarmClass("client-restart", 1, "producer / consumer restarts"),
    SwarmClass("unclean", 0, "operator-forced unclean elections (off unless configured)"),
    SwarmClass("coordinator", 0, "transaction coordinator crash / restart (transactions profile)",
               transactions_weight=2),
    SwarmClass("txn-delay", 0, "delayed produce requests and markers (transactions profile)",
               transactions_weight=4),
    SwarmClass("list-offsets", 0, "a consumer's ListOffsets, latest or earliest (off unless configured)"),
    SwarmClass("controller-failover", 0, "a new controller takes over (off unless configured)"),
    SwarmClass("list-offsets-time", 0, "a consumer's ListOffsets by timestamp (off unless configured)"),
)


@dataclass(frozen=True)
class CampaignFault:
    """A fault kind of the Spark campaigns' workload (``epochlab.campaigns.runs`` builds it):
    its default weight in a grid and the steps it is made of."""

    name: str
    weight: int
    steps: tuple[str, ...]
    doc: str


#: The campaigns' fault kinds, in the order a grid lists them.
CAMPAIGN_FAULTS: tuple[CampaignFault, ...] = (
    CampaignFault("leader-crash", 3, ("crash", "restart"),
                  "the leader crashes (sometimes losing its unflushed tail)"),
    CampaignFault("follower-lag", 2, ("slow_follower", "crash", "restart"),
                  "a follower falls behind, then the leader crashes"),
    CampaignFault("correlated", 2, ("slow_follower", "crash", "restart"),
                  "the leader and a follower crash together"),
    CampaignFault("leader-partition", 2, ("partition", "heal"),
                  "the leader (and a producer) cut off from the rest"),
)
