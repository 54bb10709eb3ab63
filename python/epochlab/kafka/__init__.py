"""Real Apache Kafka as the model's oracle, in three wings around the release's jars.

- :mod:`epochlab.kafka.jars`: resolve a Kafka release and its dependencies from Maven Central
  through the pinned ``pom.xml`` (and ``mockito-pom.xml``) shipped in this package, into a
  local cache; :mod:`epochlab.kafka.jvm`: the one in-process JVM (JPype) carrying a release's
  jars, shared by the wings below.
- :mod:`epochlab.kafka.classes`: Kafka's own classes in this process: the oracle of the
  differential tests, older releases, the stale-follower check, Kafka-written log directories
  and ``DumpLogSegments``.
- :mod:`epochlab.kafka.live`: a live KRaft cluster: its processes, faults, clients and admin.
- :mod:`epochlab.kafka.runs`: scenarios and fuzz schedules run on the live cluster beside the
  model, compared, and the downtime measurement.
- :mod:`epochlab.kafka.cli`: the ``epochlab kafka ...`` command group (``classes_cli``,
  ``cluster_cli`` and ``run_cli`` hold each wing's commands).
"""

from epochlab.kafka.jars import DEFAULT_KAFKA_VERSION, KafkaRelease, jar_dir, release_for

__all__ = ["DEFAULT_KAFKA_VERSION", "KafkaRelease", "jar_dir", "release_for"]
