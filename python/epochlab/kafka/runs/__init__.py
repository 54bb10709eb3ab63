"""Scenarios and fuzz schedules run on a live Kafka cluster, beside the model: the third wing of
``epochlab.kafka`` (``docs/kafka-run.md``).

- :mod:`~epochlab.kafka.runs.scenario`: a scenario's steps on the cluster (what cannot run
  there, ``unmappable``), the run judged by the scenario's expectations;
- :mod:`~epochlab.kafka.runs.driver`: the step driver, one function per action;
- :mod:`~epochlab.kafka.runs.links`: which links a run proxies, decided from its steps;
- :mod:`~epochlab.kafka.runs.state`: snapshots of the real cluster (``epochlab.observe``);
- :mod:`~epochlab.kafka.runs.compare`: the model's run of the same scenario and the differences;
- :mod:`~epochlab.kafka.runs.pipeline`: ``epochlab kafka run`` end to end, and its run directory;
- :mod:`~epochlab.kafka.runs.fuzz`: fuzzer schedules on the cluster and the model
  (``epochlab kafka fuzz``);
- :mod:`~epochlab.kafka.runs.downtime`: seed 002's downtime table measured live and on the model
  (``epochlab kafka downtime``).
"""
