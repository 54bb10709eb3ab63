"""Python sequences that lie about their length reach the Rust core through the bindings: they
are read by iterating, never by trusting ``__len__`` for an allocation (a lying
``__len__`` used to abort the interpreter or raise a Rust panic)."""

from __future__ import annotations

import pytest

import epochlab
from epochlab.sim.messages import LeaderAndIsr


class Liar:
    """Says it holds 2^62 items; iterating yields ``items``."""

    def __init__(self, items):
        self.items = list(items)

    def __len__(self):
        return 2**62

    def __iter__(self):
        return iter(self.items)


def test_record_values_with_a_lying_length():
    log = epochlab.ReplicaLog()
    info = log.append_as_leader(Liar([1, 2, 3]), 0)
    assert (info.base_offset, info.last_offset) == (0, 2)
    assert log.append_many_as_leader(1, Liar([1, 1]), Liar([7, 8])) == 5


def test_epoch_entries_and_replicas_with_a_lying_length():
    cache = epochlab.LeaderEpochCache(Liar([(0, 0), (2, 5)]))
    assert cache.entries() == [(0, 0), (2, 5)]
    replica = epochlab._core.Replica(1, Liar([1, 2]), 5, 1, 30000)
    msg = LeaderAndIsr(1, 1, Liar([1, 2]), 0, Liar([1, 2]), Liar([(1, 1, False)]), 1)
    assert replica.apply_leader_and_isr(msg, 0) == "leader"


@pytest.mark.parametrize("bad", [b"\x01\x02", bytearray(b"\x01")])
def test_bytes_are_not_a_sequence_of_values(bad):
    with pytest.raises(TypeError):
        epochlab.ReplicaLog().append_as_leader(bad, 0)


def test_comparing_two_logs_from_two_threads_in_opposite_orders_does_not_deadlock():
    # first_mismatch releases the GIL while it holds both logs' locks: they are taken in one
    # global order (opposite orders used to deadlock).
    import threading

    a, b = epochlab.ReplicaLog(), epochlab.ReplicaLog()
    for log in (a, b):
        log.append_many_as_leader(0, [1] * 20000, list(range(20000)))
    errors: list[BaseException] = []

    def compare(x, y):
        try:
            for _ in range(200):
                assert epochlab.first_mismatch(x, y) is None
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=compare, args=(a, b), daemon=True),
               threading.Thread(target=compare, args=(b, a), daemon=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "deadlocked"
    assert not errors
