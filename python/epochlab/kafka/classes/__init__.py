"""Kafka's own classes in this process: the oracle wing of ``epochlab.kafka``.

Kafka's storage and replication classes run through JPype in one JVM per process
(``epochlab.kafka.jvm``, with a release's jars from ``epochlab.kafka.jars``); Kafka's tools run
as subprocesses of the same jars.

- :mod:`~epochlab.kafka.classes.oracle`: ``LeaderEpochFileCache``, ``UnifiedLog`` and
  ``ProducerStateManager`` in the model's vocabulary;
- :mod:`~epochlab.kafka.classes.differential`: the same random operation sequences on Kafka's
  classes, the Rust core and the twin, compared after every operation and shrunk
  (``epochlab kafka differential``);
- :mod:`~epochlab.kafka.classes.legacy`: the leader-epoch caches of the older releases each
  generation stands for (``docs/kafka-releases.md``);
- :mod:`~epochlab.kafka.classes.stale_follower`: the re-elected leader's stale follower, on each
  KRaft release's ``Partition`` (``epochlab kafka stale-follower``);
- :mod:`~epochlab.kafka.classes.writer`: log directories written by Kafka's own classes;
- :mod:`~epochlab.kafka.classes.dumplog`: Kafka's ``DumpLogSegments`` as the judge of
  ``epochlab inspect --verify-with-kafka``.

Nothing here starts a broker; a live cluster is ``epochlab.kafka.live``.
"""
