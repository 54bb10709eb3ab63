"""Real Apache Kafka as the model's oracle.

- :mod:`epochlab.kafka.jars`: resolve a Kafka release and its dependencies from Maven Central
  through the pinned ``pom.xml`` shipped in this package, into a local cache.
- :mod:`epochlab.kafka.cli`: the ``epochlab kafka ...`` command group.
"""

from epochlab.kafka.jars import DEFAULT_KAFKA_VERSION, KafkaRelease, jar_dir, release_for

__all__ = ["DEFAULT_KAFKA_VERSION", "KafkaRelease", "jar_dir", "release_for"]
