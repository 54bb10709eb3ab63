"""A live Kafka cluster on this machine: the second wing of ``epochlab.kafka``.

- :mod:`~epochlab.kafka.live.cluster`: a local KRaft cluster of real Kafka processes from the
  resolved jars (``docs/kafka-cluster.md``);
- :mod:`~epochlab.kafka.live.zookeeper`: a ZooKeeper-mode cluster of an older release, ZooKeeper
  from the release's own jars (``docs/kafka-cluster.md``, "ZooKeeper mode");
- :mod:`~epochlab.kafka.live.start`: the cluster a command works on (attach to a running one,
  or start one of the release and mode asked for, and stop it);
- :mod:`~epochlab.kafka.live.lossyfs`: the lossy filesystem under a broker's log directory
  that a power cut takes back to its last fsyncs;
- :mod:`~epochlab.kafka.live.netns`: each node in its own network namespace when root, joined
  to the harness by a bridge;
- :mod:`~epochlab.kafka.live.faults`: faults on its processes and links (kill, pause, controlled
  shutdown, partitions through nft between the namespaces);
- :mod:`~epochlab.kafka.live.proxy`: delayed links without netem, through Toxiproxy in a
  namespace of its own (``scripts/kafka-proxy-setup``);
- :mod:`~epochlab.kafka.live.clients`: librdkafka clients that record the history the checker
  judges, and the Admin API;
- :mod:`~epochlab.kafka.live.java_clients`: Kafka's own Java producer and consumer as recording clients
  (JPype, ``epochlab.kafka.jvm``);
- :mod:`~epochlab.kafka.live.controller_admin`: electing a chosen broker with Kafka's admin
  classes.

What runs on the cluster, beside the model, is ``epochlab.kafka.runs``.
"""
