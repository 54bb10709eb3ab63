"""Scenarios: scripted failure stories with expectations, run on the simulator.

A scenario is a TOML file (or the same data built in Python with :class:`ScenarioBuilder`):

.. code-block:: toml

    name = "seed-000-leader-epoch-walkthrough"
    description = "A leads epoch 0, crashes; B leads epoch 1; A returns and truncates M3."
    source = "seeds/000_b095279da19a7cdb.txt"     # the seed document it reproduces
    generations = ["kip-101+"]                     # labels; "x+" = x and later; default all
    seed = 1                                       # root seed of the simulator
    settle_ms = 0                                  # extra time after the last step

    [cluster]                                      # ClusterConfig; Kafka dotted names allowed
    "min.insync.replicas" = 1

    [producers.p1]                                 # ProducerConfig per producer
    acks = "all"

    [consumers.c1]                                 # ConsumerConfig per consumer

    [[steps]]                                      # executed in order
    action = "produce"                             # see ACTIONS
    producer = "p1"
    values = [1, 2, 3]                             # or count = 3 (next unused integers)
    at_ms = 0                                      # absolute, or after_ms = relative
    label = "write"                                # optional, for expect.after_step

    [[expect]]                                     # judged after the run
    kind = "lost"                                  # see EXPECTATIONS
    values = [3]
    generations = ["hw-truncation"]                # optional restriction
    after_step = "write"                           # state kinds only: judge that snapshot

Modules: :mod:`~epochlab.scenarios.model` (dataclasses, vocabulary tables, the file's model),
:mod:`~epochlab.scenarios.loader` (TOML and validation, built-ins),
:mod:`~epochlab.scenarios.builder` (scenarios written in Python),
:mod:`~epochlab.scenarios.runner` (run on ``epochlab.sim.Cluster``, run directory),
:mod:`~epochlab.scenarios.expectations` (judging); what a run is seen as (snapshots, sampling,
step records) is :mod:`epochlab.observe`. The full reference is ``docs/scenario-format.md``.
"""

from epochlab.scenarios.builder import ScenarioBuilder
from epochlab.scenarios.loader import (
    builtin_names,
    builtin_text,
    from_mapping,
    load_builtin,
    load_file,
    loads,
    resolve,
)
from epochlab.scenarios.model import (
    ACTIONS,
    CONDITIONS,
    EXPECTATIONS,
    Expectation,
    Scenario,
    Step,
)

__all__ = [
    "ACTIONS",
    "CONDITIONS",
    "EXPECTATIONS",
    "Expectation",
    "Scenario",
    "ScenarioBuilder",
    "Step",
    "builtin_names",
    "builtin_text",
    "from_mapping",
    "load_builtin",
    "load_file",
    "loads",
    "resolve",
    "run_scenario",
]


def __getattr__(name: str):  # the runner imports the engine: load it only when asked
    if name == "run_scenario":
        from epochlab.scenarios.runner import run_scenario

        return run_scenario
    raise AttributeError(name)
