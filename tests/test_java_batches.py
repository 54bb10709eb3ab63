"""How many of the live harness's records Kafka's Java producer puts in one batch, asked of
Kafka's own classes: the buffer ``RecordAccumulator.append`` allocates for a new batch
(``max(batch.size, AbstractRecords.estimateSizeInBytesUpperBound(first record))``) and
``MemoryRecordsBuilder.hasRoomFor`` for every record after the first. The model's producer
puts ``batch_size_records`` records in a batch; the harness's ``batch.size`` and marker header
must give the Java client the same count, whenever the sender drains."""

from __future__ import annotations

import struct

import pytest

from epochlab.kafka.live.java_clients import (FIRST_RECORD_BOUND, MARKER_HEADER, java_batch_size,
                                              java_buffer_memory, java_producer_settings)
from epochlab.sim.config import ProducerConfig


def _records_per_batch(jpype, batch_size: int, header: tuple[str, bytes] | None, delta_ms: int) -> int:
    """Records of ours (8-byte values, ``delta_ms`` apart) one batch of the Java producer takes."""
    j = jpype.JClass
    internal = "org.apache.kafka.common.record.internal."
    records = j(internal + "AbstractRecords")
    memory = j(internal + "MemoryRecords")
    header_type = j("org.apache.kafka.common.header.Header")
    raw = jpype.JArray(jpype.JByte)
    headers = jpype.JArray(header_type)(
        [] if header is None else [j("org.apache.kafka.common.header.internals.RecordHeader")(header[0], raw(header[1]))])
    values = [raw(struct.pack(">Q", v)) for v in range(1, 41)]
    first = records.estimateSizeInBytesUpperBound(2, j(internal + "CompressionType").NONE, None, values[0], headers)
    builder = memory.builder(j("java.nio.ByteBuffer").allocate(max(batch_size, first)),
                             j("org.apache.kafka.common.compress.Compression").NONE,
                             j("org.apache.kafka.common.record.TimestampType").CREATE_TIME, 0)
    n = 0
    while n < len(values) and (n == 0 or builder.hasRoomFor(1000 + n * delta_ms, None, values[n], headers)):
        builder.append(1000 + n * delta_ms, None, values[n], headers)
        n += 1
    return n


@pytest.fixture(scope="module")
def jpype():
    from epochlab.kafka.jvm import ensure_jvm

    return ensure_jvm()


def test_batch_size_one_takes_two_plain_records(jpype) -> None:
    """Why the marker header exists: without it ``batch.size=1`` still holds two of ours."""
    assert _records_per_batch(jpype, 1, None, 0) == 2
    assert _records_per_batch(jpype, 1, None, 100) == 2


@pytest.mark.parametrize("records", [1, 2, 3, 4, 5, 8, 16, 17])
@pytest.mark.parametrize("delta_ms", [0, 50, 100, 400])
def test_the_java_batch_holds_the_models_record_count(jpype, records: int, delta_ms: int) -> None:
    settings = java_producer_settings(ProducerConfig(batch_size_records=records), "h:9092", "p")
    assert settings["batch.size"] == str(java_batch_size(records))
    assert _records_per_batch(jpype, int(settings["batch.size"]), MARKER_HEADER, delta_ms) == records


def test_the_buffer_holds_the_models_records(jpype) -> None:
    """Each batch takes ``max(batch.size, the first record's upper bound)`` from the buffer
    pool; the bound of one of ours with the marker header is what Kafka estimates."""
    j = jpype.JClass
    internal = "org.apache.kafka.common.record.internal."
    raw = jpype.JArray(jpype.JByte)
    header = j("org.apache.kafka.common.header.internals.RecordHeader")(MARKER_HEADER[0], raw(MARKER_HEADER[1]))
    bound = j(internal + "AbstractRecords").estimateSizeInBytesUpperBound(
        2, j(internal + "CompressionType").NONE, None, raw(struct.pack(">Q", 1)),
        jpype.JArray(j("org.apache.kafka.common.header.Header"))([header]))
    assert bound == FIRST_RECORD_BOUND
    for records, per_batch in [(10000, 1), (10000, 4), (50, 1), (7, 3)]:
        memory = int(java_producer_settings(ProducerConfig(buffer_memory_records=records, batch_size_records=per_batch),
                                            "h", "p")["buffer.memory"])
        assert memory == java_buffer_memory(records, per_batch)
        batches = -(-records // per_batch)
        assert memory >= batches * max(java_batch_size(per_batch), bound)


def test_ctrl_c_stays_pythons_after_the_jvm_starts() -> None:
    """The JVM JPype starts takes SIGINT: by default Ctrl-C halted the process at once (the
    brokers it had started kept running), and with ``interrupt=False`` alone it was ignored.
    After ``ensure_jvm`` a SIGINT is a KeyboardInterrupt, so cleanup code runs."""
    import signal
    import subprocess
    import sys

    code = ("import time\nfrom epochlab.kafka.jvm import ensure_jvm\nensure_jvm()\n"
            "try:\n    print('up', flush=True)\n    time.sleep(60)\nexcept KeyboardInterrupt:\n"
            "    print('cleaned up', flush=True); raise SystemExit(3)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "up"
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert (out.strip(), proc.returncode) == ("cleaned up", 3)
