"""The deterministic simulation engine of epochlab (contract: ``docs/sim-api.md``).

Modules, bottom-up:

* :mod:`~epochlab.sim.kernel` - virtual clock, event queue, per-component random streams
* :mod:`~epochlab.sim.network` - delays, loss, duplication, reordering, partitions
* :mod:`~epochlab.sim.messages` - protocol messages (Kafka error names as strings)
* :mod:`~epochlab.sim.history`, :mod:`~epochlab.sim.state` - observation (the
  :class:`~epochlab.sim.history.Recorder` of history and events, frozen snapshots)
* :mod:`~epochlab.sim.context` - :class:`~epochlab.sim.context.SimContext`, all the nodes below
  see of the run (clock and timers, network, message routing, recorder); never the facade
* :mod:`~epochlab.sim.replica` - one replica's protocol state machine (leader side in
  :mod:`~epochlab.sim.replica_leader`, follower side in :mod:`~epochlab.sim.replica_follower`)
* :mod:`~epochlab.sim.broker` - a broker node: timers, purgatories, fetcher
* :mod:`~epochlab.sim.controller` - failure detection, elections, ISR, epochs
* :mod:`~epochlab.sim.coordinator` - the transaction coordinator (``__transaction_state``,
  InitProducerId, AddPartitionsToTxn, EndTxn, markers)
* :mod:`~epochlab.sim.clients` - :class:`Producer` (transactions in
  :mod:`~epochlab.sim.producer_txn`), :class:`Consumer`
* :mod:`~epochlab.sim.cluster` - the :class:`Cluster` facade: builds the context and the nodes
  and composes them; no module above imports it (``tests/test_sim_imports.py``)
"""

from epochlab.generations import Generation
from epochlab.sim.clients import Consumer, Producer
from epochlab.sim.cluster import Cluster
from epochlab.sim.config import ClusterConfig, ConsumerConfig, ProducerConfig
from epochlab.sim.history import Event, HistoryOp, history_to_jsonl
from epochlab.sim.state import ClusterState, ReplicaState

__all__ = [
    "Cluster",
    "ClusterConfig",
    "ClusterState",
    "Consumer",
    "ConsumerConfig",
    "Event",
    "Generation",
    "HistoryOp",
    "Producer",
    "ProducerConfig",
    "ReplicaState",
    "history_to_jsonl",
]
