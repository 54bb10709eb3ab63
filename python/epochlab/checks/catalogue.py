"""A catalogue of the historical replication bugs the model can express (``docs/bugs.md`` is
generated from it: ``python -m epochlab.checks.catalogue``), and the match of a finding
against it.

Each entry names the bug (JIRA or KIP), the generations whose releases had it, the invariants
its runs break and where the project shows it (a built-in scenario or a document). A finding
*matches* an entry when its generation is one of the entry's and its invariant one of the
entry's invariants: a signature match, which says which known bug a finding most likely is,
not a proof. Where a bug's mechanism leaves a mark in the engine events, the entry names a
*witness* (:data:`WITNESSES`), and a finding whose run lacks it does not match: a campaign's
false Inv-StrongIsr in strict-min-isr (stale fetch answers, a model defect since fixed) had the
signature of the KRaft re-elected-leader bug and was matched to it by signature alone. A
finding that matches none is a candidate for a new report (its run directory
has everything to attach).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from epochlab.generations import Generation

__all__ = ["BUGS", "WITNESSES", "KnownBug", "describe_match", "leader_epoch_skips", "markdown", "match"]


@dataclass(frozen=True)
class KnownBug:
    id: str
    title: str
    generations: tuple[str, ...]
    invariants: tuple[str, ...]
    fixed_in: str
    shown_by: str
    note: str = ""
    #: fuzz fault classes a run needs to reach the bug (``epochlab.fuzz.generator.FAULT_CLASSES``)
    needs: tuple[str, ...] = ()
    #: a mechanism the run's events must show for a finding to be this bug, beyond its
    #: signature (a key of :data:`WITNESSES`); empty: the signature alone
    witness: str = ""
    #: settings without which the model does not have the bug (the generation's releases
    #: differ on it: ``kafka.release``; or the workload: producer batches of several records)
    settings: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {"id": self.id, "title": self.title, "generations": list(self.generations),
                "invariants": list(self.invariants), "fixed_in": self.fixed_in,
                "shown_by": self.shown_by, "note": self.note, "needs": list(self.needs),
                "witness": WITNESSES[self.witness][0] if self.witness else None,
                "settings": dict(self.settings)}


_LEADER_AGAIN = re.compile(r"broker (\d+) is leader in epoch (\d+) \(was leader in epoch (\d+)\)")


def leader_epoch_skips(events: Iterable[Any]) -> list[list[int]]:
    """``[broker, previous epoch, new epoch]`` for each broker that led in an epoch and becomes
    leader in one more than one above it without having been anything in between:
    ``Partition.makeLeader`` with ``isNewLeader == false``. ``events``: the engine's (dicts or
    objects with ``kind`` and ``message``, only ``role`` events read) or their text lines."""
    out = []
    for event in events:
        if isinstance(event, str):
            kind, message = "role", event
        elif isinstance(event, dict):
            kind, message = event["kind"], event["message"]
        else:
            kind, message = event.kind, event.message
        found = _LEADER_AGAIN.search(message) if kind == "role" else None
        if found and int(found.group(2)) > int(found.group(3)) + 1:
            out.append([int(found.group(1)), int(found.group(3)), int(found.group(2))])
    return out


def _leader_skips_epochs(events: Iterable[Any]) -> bool:
    return bool(leader_epoch_skips(events))


_REGISTERED = re.compile(r"controller: broker (\d+) registered")
_CONTROLLER_EPOCH = re.compile(r"leader (?:\d+|None) epoch (\d+)")
_ROLE = re.compile(r"broker (\d+) is (?:leader|follower) in epoch (\d+)")


def _outdated_control_request(events: Iterable[Any]) -> bool:
    """A broker registered again (a new session) and then took a partition state of an epoch
    older than the controller's at that registration: a LeaderAndIsr sent to its previous
    session, which before KIP-380's broker epochs nothing fenced."""
    latest = 0
    at_registration: dict[int, int] = {}
    for event in events:
        kind, message = (event["kind"], event["message"]) if isinstance(event, dict) else (event.kind, event.message)
        if kind in ("controller", "election", "isr"):
            registered = _REGISTERED.search(message)
            if registered:
                at_registration[int(registered.group(1))] = latest
            for found in _CONTROLLER_EPOCH.finditer(message):
                latest = max(latest, int(found.group(1)))
        elif kind == "role":
            found = _ROLE.search(message)
            if found and int(found.group(2)) < at_registration.get(int(found.group(1)), -1):
                return True
    return False


def _diverging_fetch_as_leo(events: Iterable[Any]) -> bool:
    """A leader took the offset of a fetch it answered with DivergingEpoch as the follower's
    log end offset (the model does so only for ``kafka.release`` 2.8.0)."""
    for event in events:
        message = event["message"] if isinstance(event, dict) else event.message
        if "diverging fetch offset" in message and "KAFKA-13141" in message:
            return True
    return False


def _zombie_controller_write(events: Iterable[Any]) -> bool:
    """A deposed controller wrote the partition state after a new one took over (the model
    lets it only before 2.1)."""
    for event in events:
        message = event["message"] if isinstance(event, dict) else event.message
        if message.startswith("deposed controller") and "writes the partition state" in message:
            return True
    return False


def _wrapper_misaligned(events: Iterable[Any]) -> bool:
    """A v0/v1 follower took a compressed wrapper that does not start at its log end offset
    (its log then holds offsets twice, or misses some), or a truncation target fell inside a
    wrapper, which went whole and left a hole (the replicas' events)."""
    for event in events:
        message = event["message"] if isinstance(event, dict) else event.message
        if message.startswith("broker ") and ("took wrapper [" in message or "went whole, offsets" in message):
            return True
    return False


def _truncation_halts(events: Iterable[Any]) -> bool:
    """A follower refused a truncation and its broker exited (before 2.0.1, unclean leader
    election disabled: the follower's event)."""
    for event in events:
        message = event["message"] if isinstance(event, dict) else event.message
        if "halts: log truncation is not allowed" in message:
            return True
    return False


#: Mechanisms a finding's events must show (see :attr:`KnownBug.witness`): a description and
#: the test over the run's engine events.
WITNESSES: dict[str, tuple[str, Callable[[Iterable[Any]], bool]]] = {
    "leader-skips-epochs": ("a broker leads again in an epoch more than one above the one it "
                            "led in, never having followed in between", _leader_skips_epochs),
    "outdated-control-request": ("a broker that registered again takes a partition state of an "
                                 "epoch older than the controller's at its registration",
                                 _outdated_control_request),
    "diverging-fetch-as-leo": ("a leader takes the offset of a fetch it answers with "
                               "DivergingEpoch as the follower's log end offset",
                               _diverging_fetch_as_leo),
    "zombie-controller-write": ("a deposed controller writes the partition state after a new "
                                "controller took over", _zombie_controller_write),
    "truncation-halts": ("a follower whose log end offset is past the leader's exits its broker "
                         "instead of truncating", _truncation_halts),
    "wrapper-misaligned": ("a follower takes a compressed wrapper (message format v0/v1) that "
                           "does not start at its log end offset, or truncates inside one",
                           _wrapper_misaligned),
}


BUGS: tuple[KnownBug, ...] = (
    KnownBug("KIP-101 problem 1", "a follower truncates to its high watermark and loses a committed "
             "record that the new leader then lacks", ("hw-truncation",),
             ("Inv-StrongIsr", "Inv-Durability", "Inv-LeaderCompleteness", "lost-write",
              "Inv-ConsistentRead", "inconsistent-offsets"),
             "0.11.0 (KIP-101 leader epochs)",
             "scenario seed-004-kip101-problem-1 (also live on Kafka 0.10.2.2, docs/kafka-run.md)"),
    KnownBug("KIP-101 problem 2", "replicas diverge below the high watermark after both crash and "
             "the one that lost its tail leads again", ("hw-truncation",),
             ("Inv-LogMatching", "Inv-ConsistentRead", "inconsistent-offsets"),
             "0.11.0 (KIP-101 leader epochs)",
             "scenario seed-004-kip101-problem-2 (also live on Kafka 0.10.2.2, docs/kafka-run.md)"),
    KnownBug("KAFKA-3919", "with compressed wrappers (message format v0/v1) a truncation target or "
             "a fetch offset can fall inside a new leader's wrapper: a follower takes the whole "
             "wrapper, since only its own, last, offset is checked, so its log holds those "
             "offsets twice, the first copy records the leader does not have (and a broker "
             "whose recovery rebuilds the index from such a log can fail to start); a truncation "
             "inside a wrapper removes it whole and leaves a hole below the log end offset",
             # 0.10.2.0 Log.append (assignOffsets = false): "Out of order offsets" only if the
             # first shallow offset is below the log end offset; LogSegment.truncateTo cuts at
             # the wrapper holding the target, Log.truncateTo sets the LEO to the target;
             # LogSegment.recover indexes the wrappers' first inner offsets
             # (InvalidOffsetException). The fuzzer writes one-record batches unless a profile
             # sets batch_size_records (benches/profiles/wrapper-batches.json)
             ("hw-truncation",),
             ("Inv-LogMatching", "Inv-OffsetMonotone", "Inv-ConsistentRead", "inconsistent-offsets",
              "Inv-StrongIsr", "Inv-Durability", "Inv-LeaderCompleteness", "lost-write"),
             "0.11.0 (KIP-101: the follower truncates to the leader's epoch end, a batch boundary, "
             "before it fetches; message format v2)", "scenario kafka-3919-wrapper-below-log-end (also live on "
             "Kafka 0.10.2.2, docs/kafka-run.md)",
             "needs producer batches of more than one record (batch_size_records)",
             witness="wrapper-misaligned", settings=(("producers' batch_size_records", "2 or more"),)),
    KnownBug("KAFKA-7414 (KAFKA-3410)", "with unclean leader election disabled, a follower whose "
             "fetch is out of range because the leader's log ends below its own exits its broker "
             "instead of truncating; restarted, it exits again as long as the leader's log is the "
             "shorter, so the partition never gets that replica back",
             # ReplicaFetcherThread.handleOffsetOutOfRange, 0.10.2.0-2.0.0: "Exiting because log
             # truncation is not allowed" (0.10: System.exit, which also deadlocks the shutdown
             # hook, KAFKA-4039; 0.11-2.0: FatalExitError). KIP-101's epochs do not prevent it
             # when the leader lost the epoch's records (a lossy crash of the last ISR member).
             # kip-279's releases have it only in 2.0.0 (kafka.release): listed, since the
             # witness keeps the default release (2.0.1) from matching it
             ("hw-truncation", "kip-101", "kip-279"), ("Liveness-Converge",),
             "2.0.1 and 2.1.0 (out of range errors are never fatal for a follower: it truncates; "
             "commit c5ef614bbf1)", "scenario kafka-7414-follower-halts-instead-of-truncating (also live on "
             "Kafka 2.0.0, docs/kafka-run.md)",
             "with unclean leader election disabled (the fuzzer's default); in kip-279 only with "
             "kafka.release 2.0.0", witness="truncation-halts"),
    KnownBug("KAFKA-6361 (KIP-279)", "with OffsetsForLeaderEpoch v0 a follower truncates to an end "
             "offset of an epoch it never had, so logs can diverge after quick leader changes",
             # a divergent replica keeps a record its leader never had; once it leads, the
             # idempotent producer's retry of that record lands too (0602e14's campaign, kip-101 seed
             # 9502 run 1016: Inv-LogMatching first, then the duplicate)
             ("kip-101",), ("Inv-LogMatching", "Inv-ConsistentRead", "inconsistent-offsets", "duplicate"),
             "2.0.0 (KIP-279: the leader answers with the epoch too)", "PROTOCOL.md 1.4, docs/fuzzing.md"),
    KnownBug("KAFKA-7415", "a new leader assigns its epoch only at its first append, so its epoch "
             "cache and a follower's disagree on where the epoch starts", ("kip-101", "kip-279"),
             # the divergence it leaves below the HW is then read and lost: a consumer's read
             # and the final log disagree (fde2de7's campaign, kip-279 seed 5101 run 2429: Inv-EpochMonotone
             # first, then Inv-LogMatching, Inv-ConsistentRead, inconsistent-offsets); a record
             # kept only by the divergent replica is written again by the producer's retry once
             # that replica leads (0602e14's campaign, kip-279 seed 9502 run 1016: duplicate)
             ("Inv-EpochMonotone", "Inv-LogMatching", "Inv-ConsistentRead", "inconsistent-offsets",
              "duplicate"),
             "2.1.0 (the leader assigns the epoch when it becomes leader)", "PROTOCOL.md 1.2, docs/fuzzing.md"),
    KnownBug("KAFKA-7128", "a follower joins the ISR with a log end offset below the leader epoch's "
             "start offset, so a committed record can be missing from an ISR member",
             # every release before 2.1 admits a follower at LEO >= HW alone: 0.10.2.2's
             # Partition.maybeExpandIsr (`replica.logEndOffset.offsetDiff(leaderHW) >= 0`), so
             # the mechanism is there before KIP-101 too (bughunt found it in hw-truncation)
             ("hw-truncation", "kip-101", "kip-279"),
             ("Inv-IsrJoin", "Inv-StrongIsr", "Inv-Durability", "Inv-LeaderCompleteness", "lost-write"),
             "2.1.0 (ISR join needs LEO >= leader epoch start offset)", "PROTOCOL.md 1.7, docs/fuzzing.md"),
    KnownBug("ZooKeeper ABA restart (KIP-380)", "a restarted broker that registers again between its "
             "old session's expiry and the controller's read of /brokers/ids is taken for the same "
             "broker: it gets no partition state and stays in the ISR, also after losing its "
             "unflushed tail",
             ("hw-truncation", "kip-101", "kip-279"),
             # a missed incarnation gets no LeaderAndIsr: it never fetches or leads, so the
             # partition does not converge until the controller next changes it
             ("Inv-UncleanExclusion", "Inv-StrongIsr", "Inv-Durability", "lost-write", "Liveness-Converge"),
             "2.2.0 (KIP-380 broker epochs)", "PROTOCOL.md 1.10, docs/fuzzing.md (open problems)"),
    KnownBug("KAFKA-7235 (KIP-380)", "a LeaderAndIsr the controller sent before a broker's "
             "session expired reaches the broker after it registered again, and the broker, which "
             "cannot tell the request is outdated, leads or follows in that older epoch",
             # a652835's bug hunt of hw-truncation (random engine, seed 1, run 174): broker 1's
             # session expired with requests of epochs 2 and 3 on their way; it registered again
             # and then became leader in epoch 2 while the controller was at epoch 5, appending
             # after records of epoch 4 it had fetched. Releases before 0.11 carry no epochs in
             # their batches, so hw-truncation has the mechanism but no Inv-EpochMonotone to
             # break (the checker does not evaluate it there); from 0.11 the stale leader's
             # batches are really out of order
             ("kip-101", "kip-279"),
             ("Inv-EpochMonotone",),
             "2.2.0 (KIP-380: controller requests carry the broker epoch, a stale one is refused)",
             "docs/bugs.md", witness="outdated-control-request"),
    KnownBug("KAFKA-6082 (KAFKA-3083)", "a controller that lost its session while handling a "
             "broker failure still writes the ISR change after a new controller took over; the "
             "leader refuses the old controller's LeaderAndIsr, keeps its old leader epoch, and "
             "every ISR change it tries fails on the zkVersion, so the ISR never converges",
             # writes of a deposed controller are conditional on the partition znode's version
             # only before 2.1.0 (KafkaZkClient.updateLeaderAndIsr then adds a check of
             # /controller_epoch's zkVersion); the model's G0-G2 have the watch delay that
             # leaves a broker failure for the deposed controller to handle
             ("hw-truncation", "kip-101", "kip-279"),
             ("Liveness-Converge",),
             "2.1.0 (every controller write checks the controller epoch's zkVersion; commit 297fb396a00)",
             "scenario kafka-6082-zombie-controller-write",
             "needs the controller-failover step (fault class controller-failover, off by default)",
             ("controller-failover",), witness="zombie-controller-write"),
    KnownBug("KAFKA-2334", "a new leader answers ListOffsets(latest) with its own high watermark, which "
             "followers learn one fetch late, so the latest offset a client is told can go back after "
             "a leader change", ("hw-truncation", "kip-101", "kip-279"), ("Inv-ClientHWMonotone",),
             "2.2.0 (KIP-207: OFFSET_NOT_AVAILABLE until the new leader's HW reaches its epoch's start "
             "offset, Partition.fetchOffsetForTimestamp)", "scenario kafka-2334-list-offsets-go-back",
             "needs the list-offsets step (fault class list-offsets, off by default in this build)",
             ("list-offsets",)),
    KnownBug("KAFKA-13141", "a leader answering a follower's fetch with DivergingEpoch still takes "
             "the fetch offset as the follower's log end offset, so a deposed leader whose "
             "divergent tail reaches the high watermark is put back into the ISR before it "
             "truncates, and can be elected with committed records missing",
             # Kafka 2.8.0 only (2.7 followers send no last fetched epoch, KAFKA-10554 came
             # in 2.8.0): the generation's other releases have the fix, so the model has the
             # bug only with kafka.release 2.8.0
             ("diverging-epoch",),
             # Inv-IsrJoin: the recorded LEO (the diverged fetch offset) passes the leader
             # epoch start offset check while the follower's log, once truncated, ends below it
             ("Inv-IsrJoin", "Inv-StrongIsr", "Inv-Durability", "Inv-LeaderCompleteness", "lost-write"),
             "2.8.1 (ReplicaManager.updateFollowerFetchState skips a read with a diverging epoch)",
             "scenario kafka-13141-diverging-fetch-joins-isr (also live on Kafka 2.8.0, docs/kafka-run.md)",
             "only with kafka.release 2.8.0", witness="diverging-fetch-as-leo",
             settings=(("kafka.release", "2.8.0"),)),
    KnownBug("KRaft re-elected leader keeps stale follower state", "a leader that catches up on the "
             "metadata log across two epochs keeps its followers' old log end offsets and can "
             "acknowledge an acks=all write a clean election then loses", ("strict-min-isr",),
             # Inv-LogMatching: the stale offsets can also carry the re-elected leader's HW
             # past an offset where a follower has since taken another leader's record (its
             # log diverged and it refetched), so two logs differ below both HWs until the
             # next fetch truncates one (tests/fixtures/schedules/g5-kraft-skip-epoch-*);
             # Inv-ConsistentRead and inconsistent-offsets: a consumer read the write before the
             # clean election lost it, and another value took its offset (guided-search findings
             # with transactions, which the proposed fix removes); Inv-UncleanExclusion: the
             # write the stale view committed extends the committed prefix, so a replica that
             # later loses its unflushed tail rejoins the ISR below it
             # (tests/fixtures/schedules/g5-kraft-skip-epoch-unclean-exclusion.json);
             # poll-skip: a consumer read past the lost write, and the offsets after it moved;
             # Liveness-LSO: the lost record is a transaction's marker, so the partition holds a
             # transaction the coordinator has ended (guided-search findings with transactions,
             # tests/fixtures/schedules/g5-kraft-skip-epoch-{poll-skip,hanging-transaction}.json);
             # Inv-TxnAtomicity: the lost record is the abort marker of a transaction, and its
             # writes read as part of the producer's next, committed one
             # (tests/fixtures/schedules/g5-kraft-skip-epoch-txn-atomicity.json)
             ("Inv-StrongIsr", "Inv-Durability", "Inv-LeaderCompleteness", "lost-write", "Inv-LogMatching",
              "Inv-ConsistentRead", "inconsistent-offsets", "Inv-UncleanExclusion", "poll-skip",
              "Liveness-LSO", "Inv-TxnAtomicity"),
             "not fixed as of 4.4.0 (no report known; proposed fix in the report)",
             "scenarios kraft-skip-epoch-*, docs/kafka-findings/",
             "found by this project; shown on live clusters of Kafka 4.1.2, 4.3.1 and 4.4.0 and "
             "on Partition of every KRaft release 3.3.2-4.4.0; the ZooKeeper generations reach it "
             "through a controller failover (scenario zk-skip-epoch-controller-failover)",
             witness="leader-skips-epochs"),
)


def match(generation: Generation | str, invariant: str,
          events: Iterable[Any] | None = None) -> list[KnownBug]:
    """Entries whose generations include ``generation`` and whose invariants ``invariant``;
    given the run's engine ``events``, only those whose witness (if any) the run shows."""
    label = Generation.parse(generation).label
    hits = [b for b in BUGS if label in b.generations and invariant in b.invariants]
    if events is not None:
        events = list(events)
        hits = [b for b in hits if not b.witness or WITNESSES[b.witness][1](events)]
    return hits


def describe_match(generation: Generation | str, invariant: str,
                   events: Iterable[Any] | None = None) -> str:
    """One sentence for a finding's README (``events``: the run's, to check witnesses)."""
    events = list(events) if events is not None else None
    hits = match(generation, invariant, events)
    if not hits:
        lookalikes = [b for b in match(generation, invariant) if b not in hits]
        unlike = "".join(f" Its signature is that of {b.id}, but the run does not show that "
                         f"bug's mechanism ({WITNESSES[b.witness][0]})." for b in lookalikes)
        return (f"Known bugs: none of `docs/bugs.md` matches {invariant} in "
                f"{Generation.parse(generation).label}.{unlike} A candidate for a new Kafka bug "
                "report (attach this run directory), or a model defect to fix.")
    names = "; ".join(f"{b.id} ({b.title}; fixed in {b.fixed_in})" for b in hits)
    return (f"Known bugs with this signature ({invariant} in {Generation.parse(generation).label}, "
            f"`docs/bugs.md`): {names}. A signature match says which known bug this most likely "
            "is, not that it is.")


def markdown() -> str:
    """The table of ``docs/bugs.md``."""
    lines = ["| bug | what happens | generations | invariants it breaks | fixed in | shown by |",
             "|---|---|---|---|---|---|"]
    for b in BUGS:
        title = b.title + (f" ({b.note})" if b.note else "")
        if b.witness:
            title += f"; a finding matches only if its run shows it: {WITNESSES[b.witness][0]}"
        lines.append(f"| {b.id} | {title} | {', '.join(b.generations)} | {', '.join(b.invariants)} "
                     f"| {b.fixed_in} | {b.shown_by} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # pragma: no cover
    print(markdown(), end="")
