"""State invariants (``docs/invariants.md`` 1-12), checked after every engine event.

:class:`StateChecker` keeps the ground truth the definitions need and evaluates each invariant
on the cluster whenever some replica or the controller changed (a key per broker and one for
the controller detect that: ``ChangeWatch``, one Rust call per event with the Rust core, its
plain statement in ``epochlab.reference`` with the reference backend):

* the *truth log*: every batch below ``trueHW``, the highest HW reached by a leader that the
  controller elected for its epoch, copied from that leader when its HW rose (a log of the
  same implementation, so whole-log comparisons are one ``first_mismatch`` scan in Rust);
* the elections (clean/unclean), the crashes that lost an unflushed tail, and the brokers
  restarted after such a crash that have not yet re-fetched up to ``trueHW``.

Each violation is classified (``checks.verdict``): loss or divergence after an unclean
election, or after more than ``min.insync.replicas - 1`` lossy crashes, is allowed by the
configuration; everything else is a protocol violation.

Not checkable from state and therefore not here: the per-message halves of Inv-EpochFencing
(which epoch a fetch carried) and Inv-IsrJoin's HW clause at proposal time. Transactions
(Inv-ProducerFencing, Inv-TxnAtomicity, Liveness-LSO) are judged after the run by
:mod:`epochlab.checks.transactions` and :mod:`epochlab.checks.liveness`.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable

import epochlab._core as core
import epochlab.reference as reference
from epochlab.checks.verdict import ALLOWED, PROTOCOL, Violation
from epochlab.errors import LogError

if TYPE_CHECKING:
    from epochlab.sim.cluster import Cluster

__all__ = ["STATE_INVARIANTS", "StateChecker"]

STATE_INVARIANTS = (
    "Inv-Durability", "Inv-LeaderCompleteness", "Inv-StrongIsr", "Inv-ReplicationQuorumSuperset",
    "Inv-LogMatching", "Inv-EpochMonotone", "Inv-OffsetMonotone", "Inv-HW-bounds",
    "Inv-EpochFencing", "Inv-IsrJoin", "Inv-MinIsr", "Inv-UncleanExclusion",
)


def implementation(log: Any) -> ModuleType:
    """The module (Rust core or reference) a log belongs to, for its whole-log scans."""
    return core if isinstance(log, core.ReplicaLog) else reference


class StateChecker:
    """Evaluates the state invariants on ``cluster``; ``step()`` gives the current action
    index for reports. Call :meth:`observe` after every engine event and every action."""

    def __init__(self, cluster: Cluster, step: Callable[[], int | None] = lambda: None) -> None:
        self.cluster = cluster
        self.step = step
        self.violations: list[Violation] = []
        self._seen: set[str] = set()
        first_log = next(iter(cluster.brokers.values())).replica.log
        self.impl = implementation(first_log)
        self.truth = self.impl.ReplicaLog()
        self.true_hw = 0
        self.true_hw_history: list[tuple[int, int]] = [(0, 0)]
        self.min_isr = min(cluster.config.min_insync_replicas, len(cluster.config.replicas or ()))
        #: Inv-EpochMonotone needs leader epochs in the log: batches carry one from message
        #: format v2 and the leader-epoch cache exists from 0.11.0 (KIP-101). The
        #: hw-truncation generation's releases (0.10.2 and before, formats v0 / v1) have
        #: neither; the epochs the model writes there are its own labels, and a label out of
        #: order (a broker acting on a LeaderAndIsr that reached it late, KAFKA-7235) is no
        #: state those releases could show.
        self.epochs_in_batches = cluster.generation.uses_epoch_cache
        self.lossy_crashes: list[tuple[int, int]] = []       # (time, broker)
        self.recovering: set[int] = set()                    # lossy-crashed, not caught up
        self._watch = self.impl.ChangeWatch()  # which keys moved since the last observe
        self._hook: Callable[[], None] | None = None
        # the passing case of the per-event checks in Rust, for Rust replicas
        first_replica = next(iter(cluster.brokers.values())).replica
        self._scan = core.StateScan(self.epochs_in_batches, cluster.generation.strict_min_isr,
                                    self.min_isr) if isinstance(first_replica, core.Replica) else None
        self._leader_hw: dict[tuple[int, int, int], int] = {}
        self._leaderships: set[tuple[int, int]] = set()
        # (epoch, leader) of every election so far (the controller's list only grows)
        self._elected: set[tuple[int, int]] = set()
        self._elections_seen = 0
        self._last_isr: tuple[int, ...] = tuple(cluster.controller.isr)
        # a broker left ``recovering`` at the last check: its Inv-StrongIsr is asked next time
        self._rejoined = False
        #: called after every check, with the state checked (the guided search's coverage,
        #: ``epochlab.fuzz.coverage``); they only read
        self.listeners: list[Callable[[], None]] = []
        #: Skip the checks whose inputs did not move (see :meth:`observe`): the rust backend.
        #: The reference backend, the oracle, evaluates them all after every change (the plain
        #: form), so the rust-vs-reference differential (``tests/test_backends_differential.py``,
        #: ``benches/backend_agreement.py``) holds the skipping to the plain form.
        self.incremental = cluster.backend != "reference"

    # -- classification ---------------------------------------------------------------------
    def unclean_elections(self, until_ms: int | None = None) -> list[tuple[int, int, int, bool]]:
        return [e for e in self.cluster.controller.elections
                if self._lossy_election(e) and (until_ms is None or e[0] <= until_ms)]

    def _lossy_election(self, election: tuple[int, int, int, bool]) -> bool:
        """Whether an election may lose committed data: an unclean one, except KIP-966's
        election of the last known leader (``canElectLastKnownLeader``), which Kafka also
        marks unclean but which loses only what that leader lost in an unclean shutdown
        before it (the ISR was empty since it led)."""
        t, epoch, leader, unclean = election
        if not unclean:
            return False
        if epoch not in getattr(self.cluster.controller, "last_known_epochs", ()):
            return True
        return any(b == leader and at <= t for at, b in self.lossy_crashes)

    def allowance(self, until_ms: int | None = None) -> str | None:
        """Why the configuration permits loss or divergence up to ``until_ms`` (``None``: it
        does not)."""
        unclean = self.unclean_elections(until_ms)
        if unclean:
            t, epoch, leader, _ = unclean[0]
            if epoch in getattr(self.cluster.controller, "last_known_epochs", ()):
                return (f"broker {leader}, the last known leader, was elected with an empty ISR "
                        f"and ELR in epoch {epoch} at {t} ms after losing its unflushed tail "
                        "(KIP-966 canElectLastKnownLeader: an unclean election)")
            return f"unclean leader election of broker {leader} in epoch {epoch} at {t} ms"
        lossy = [x for x in self.lossy_crashes if until_ms is None or x[0] <= until_ms]
        ctrl = self.cluster.controller
        if lossy and not ctrl.elr_enabled:
            # Every release without eligible leader replicas (all ZooKeeper-era ones, KRaft
            # with the feature off) elects the last ISR member when it comes back, whatever it
            # lost in an unclean shutdown: the problem KIP-966 describes and fixes.
            return (f"broker {lossy[0][1]} lost its unflushed tail and eligible leader "
                    "replicas are off: a last replica standing restarted after an unclean "
                    "shutdown may be elected (KIP-966)")
        if len(lossy) > self.min_isr - 1:
            return (f"{len(lossy)} crashes lost their unflushed tail (brokers "
                    f"{[b for _, b in lossy]}), more than min.insync.replicas - 1 = {self.min_isr - 1}")
        return None

    def _believed_beyond(self, b: int, leo: int) -> bool:
        """Whether a live leader still believes ``b`` holds more than its log does: the
        follower state of ``b``'s incarnation before the crash, which the leader keeps until
        a fetch of the new one replaces it (``Replica.updateFetchStateOrThrow``), and counts
        for the HW meanwhile (``Partition.maybeIncrementLeaderHW``: the maximal ISR's stored
        LEOs). So the records the crash took can become committed after it, on the strength
        of the copy it took: the broker is caught up only once no leader counts that copy."""
        for x in self.cluster.brokers.values():
            if x.broker_id == b or not x.alive or x.replica.role != "leader":
                continue
            known = x.replica.follower_log_end_offset(b)
            if known is not None and known > leo:
                return True
        return False

    def note_lossy_crash(self, broker: int) -> None:
        """The executor reports a crash that lost the page cache (``lose_unflushed``)."""
        self.lossy_crashes.append((self.cluster.now_ms, broker))
        self.recovering.add(broker)
        self._watch.forget(broker)  # re-check it at the next observation

    def report(self, invariant: str, message: str, details: dict[str, Any],
               loss_like: bool = True, reason: str | None = None) -> None:
        """Record the first failure of ``invariant``; ``loss_like`` failures are allowed when
        :meth:`allowance` gives a reason."""
        if invariant in self._seen:
            return
        self._seen.add(invariant)
        why = reason or (self.allowance(self.cluster.now_ms) if loss_like else None)
        self.violations.append(Violation(invariant, ALLOWED if why else PROTOCOL, self.step(),
                                         self.cluster.now_ms, message, details, why))

    # -- observation ------------------------------------------------------------------------
    def observe(self) -> None:
        """Check every invariant whose inputs changed since the last call.

        Each check below is a function of a few inputs: brokers' change keys, the controller's
        key, the truth (``trueHW``) and the recovering set. When none of a check's inputs moved
        since its last evaluation its outcome is the one it had then, already reported (a
        second report of an invariant is a no-op), so it is skipped: the checks of one event
        cost what that event changed. The reference backend's checker (``incremental`` false,
        the plain form the differential compares with) evaluates every check whenever anything
        changed."""
        found = self._watch.changes(self.cluster.brokers, self.cluster.controller)
        if found is not None:
            self._check(*found)

    def hook(self) -> Callable[[], None]:
        """:meth:`observe` as one callable for the kernel's ``observe`` hook (the Rust
        ``Watcher`` with the Rust core: no Python frame for the events that change nothing).
        The Rust kernel tells the ``Watcher`` whose event it ran (the node a message was
        delivered to, or whose event scheduled the timer), and only that broker's (the
        controller's) key is compared: components act on each other only through messages
        (``_core.Watcher``). The reference backend's Python kernel compares every key after
        every event, the form the differential holds this one to."""
        if self._hook is None:  # made once per run (the executor asks once per action)
            brokers, controller = self.cluster.brokers, self.cluster.controller
            if isinstance(self._watch, core.ChangeWatch):
                self._hook = self._watch.watching(brokers, controller, self._check)
            else:
                self._hook = self._watch.watching(brokers, controller, self._check)
        return self._hook

    def _check(self, changed: list[int], ctrl_changed: bool) -> None:
        """The checks after brokers ``changed`` and (``ctrl_changed``) the controller moved.
        With Rust replicas, ``core.StateScan.check`` answers them first, part by part in the
        order below: when every part passes there (it made the same bookkeeping writes) no
        Python runs; when one would fail, the Python statement goes on from that part
        (:meth:`_check_from`), and each part after it is again asked of the scan first."""
        scan = self._scan if self.incremental else None
        if scan is None:
            self._check_from(0, None, changed, ctrl_changed, False)
        else:
            resume = scan.check(self, changed, ctrl_changed)
            if resume is not None:
                stage, moved = resume
                self._check_from(stage, scan, changed, ctrl_changed, bool(moved))
        for listen in self.listeners:
            listen()

    def _check_from(self, stage: int, scan: Any, changed: list[int], ctrl_changed: bool,
                    moved: bool) -> None:
        """:meth:`_check` from part ``stage`` on (0: the brokers' own checks and the truth,
        which compute ``moved``; 1: the leaders; 2: log matching; 3: the ISR); each part asks
        ``scan`` (``core.StateScan``, or ``None``) for its passing case first."""
        brokers = self.cluster.brokers
        if stage == 0:
            for b in changed:
                if scan is None or not scan.replica(b, brokers[b], self._leader_hw):
                    self._check_replica(b)
            everything = ctrl_changed or not self.incremental
            true_hw = self.true_hw
            self._advance_true_hw(None if everything else changed)
            moved = everything or self.true_hw != true_hw
        if stage <= 1 and (scan is None or not scan.leaders(self, changed, moved)):
            self._check_leaders(changed, moved)
        if stage <= 2 and (scan is None or not scan.log_matching(brokers, changed)):
            self._check_log_matching(changed)
        if scan is None or ctrl_changed or self.recovering or self._rejoined \
                or not scan.strong_isr(self, changed, moved):
            self._check_isr(changed, ctrl_changed, moved)

    # -- per replica: 6, 7, 8, 11 -----------------------------------------------------------
    def _check_replica(self, b: int) -> None:
        broker = self.cluster.brokers[b]
        r, log = broker.replica, broker.replica.log
        start, hw, leo = log.log_start_offset, log.high_watermark, log.log_end_offset
        if not start <= hw <= leo:
            self.report("Inv-HW-bounds", f"broker {b}: not logStart {start} <= HW {hw} <= LEO {leo}",
                        {"replica": b, "log_start_offset": start, "high_watermark": hw,
                         "log_end_offset": leo}, loss_like=False)
        holes = log.holes()
        if holes:
            self.report("Inv-OffsetMonotone", f"broker {b}: offsets {holes[0][0]}..{holes[0][1] - 1} "
                        "hold no batch (truncation target inside a batch)",
                        {"replica": b, "holes": [list(h) for h in holes]}, loss_like=False)
        if self.epochs_in_batches:
            self._check_epochs(b, log, r)
        if broker.alive and r.role == "leader" and r.leader_epoch is not None:
            k = (b, broker.incarnation, r.leader_epoch)
            before = self._leader_hw.get(k)
            if before is not None and hw < before:
                self.report("Inv-HW-bounds", f"leader {b} HW went down {before} -> {hw} in epoch "
                            f"{r.leader_epoch}", {"replica": b, "epoch": r.leader_epoch,
                                                  "before": before, "after": hw}, loss_like=False)
            if (self.cluster.generation.strict_min_isr and before is not None and hw > before
                    and len(r.isr) < self.min_isr):
                self.report("Inv-MinIsr", f"leader {b} advanced its HW {before} -> {hw} with ISR "
                            f"{list(r.isr)} smaller than min.insync.replicas {self.min_isr}",
                            {"replica": b, "epoch": r.leader_epoch, "isr": list(r.isr),
                             "before": before, "after": hw}, loss_like=False)
            self._leader_hw[k] = max(hw, before or 0)

    def _check_epochs(self, b: int, log: Any, r: Any) -> None:
        """Inv-EpochMonotone: batch epochs non-decreasing; the cache equals the epoch
        boundaries of the log plus at most one data-less trailing entry at the LEO."""
        derived, bad = log.epoch_boundaries()  # one pass in the log's implementation
        last_epoch = derived[-1][0] if derived else -1
        if bad is not None:
            e = bad.partition_leader_epoch
            self.report("Inv-EpochMonotone", f"broker {b}: batch at {bad.base_offset} has "
                        f"epoch {e} after epoch {last_epoch}",
                        {"replica": b, "offset": bad.base_offset, "epoch": e,
                         "previous_epoch": last_epoch, "records": list(bad.records)})
            return
        entries = [tuple(x) for x in log.epoch_entries()]
        leo = log.log_end_offset
        extra = entries[len(derived):]
        ok = entries[:len(derived)] == derived and (
            not extra or (len(extra) == 1 and extra[0][1] == leo and extra[0][0] > last_epoch))
        if not ok and derived and entries and log.log_start_offset > 0:
            ok = entries[-len(derived):] == derived  # log start moved: the cache is clipped
        if not ok:
            self.report("Inv-EpochMonotone", f"broker {b}: epoch cache {entries} does not match "
                        f"the log's epoch boundaries {derived} (LEO {leo})",
                        {"replica": b, "epoch_cache": [list(e) for e in entries],
                         "log_epochs": [list(e) for e in derived], "log_end_offset": leo})

    # -- ground truth -----------------------------------------------------------------------
    def _legitimate(self, b: int, epoch: int | None) -> bool:
        """Whether ``b`` leading ``epoch`` is the controller's choice (an election of it, or
        the initial leader in epoch 0)."""
        if epoch is None:
            return False
        if epoch == 0:
            return b == (self.cluster.config.replicas or (None,))[0]
        elections = self.cluster.controller.elections
        if len(elections) != self._elections_seen:  # appended to since the last look
            if len(elections) < self._elections_seen:  # (never: the list only grows)
                self._elected, self._elections_seen = set(), 0
            self._elected.update((e[1], e[2]) for e in elections[self._elections_seen:])
            self._elections_seen = len(elections)
        return (epoch, b) in self._elected

    def _advance_true_hw(self, changed: list[int] | None) -> None:
        """Copy what a legitimate leader's HW passed into the truth. Only brokers in
        ``changed`` (all when ``None``) can move it: an unchanged broker's HW was at most
        ``trueHW`` after its last look (``trueHW`` only grows), and whether it leads
        legitimately changes only with the controller's election list."""
        brokers = self.cluster.brokers
        for b in brokers if changed is None else changed:
            broker = brokers[b]
            if not broker.alive:
                continue
            r = broker.replica
            if r.role != "leader" or not self._legitimate(b, r.leader_epoch):
                continue
            log = r.log
            hw = log.high_watermark
            if hw <= self.true_hw:
                continue
            start = self.truth.log_end_offset
            try:
                batches = [x for x in log.read(start) if x.base_offset < hw] if start < log.log_end_offset else []
                if batches and batches[0].base_offset == start:
                    self.truth.append_batches_as_follower(batches)
            except LogError:
                pass
            self.true_hw = hw
            self.true_hw_history.append((self.cluster.now_ms, hw))

    def true_hw_at(self, time_ms: int) -> int:
        value = 0
        for t, hw in self.true_hw_history:
            if t > time_ms:
                break
            value = hw
        return value

    def _missing_committed(self, log: Any) -> int | None:
        """First offset below ``trueHW`` where ``log`` differs from the truth, or ``None``."""
        if self.true_hw == 0:
            return None
        m = self.impl.first_mismatch(self.truth, log)
        if m is not None and m < self.true_hw:
            return int(m)
        if log.log_end_offset < self.true_hw:
            return int(log.log_end_offset)
        return None

    def _record_at(self, log: Any, offset: int) -> dict[str, Any]:
        return {"value": log.value_at(offset) if offset < log.log_end_offset else None,
                "epoch": log.epoch_for_offset(offset) if offset < log.log_end_offset else None}

    # -- 1, 2, 4, 9 -------------------------------------------------------------------------
    def _check_leaders(self, changed: list[int], moved: bool) -> None:
        """``moved``: the controller's key or the truth moved (or the plain form)."""
        c, ctrl = self.cluster, self.cluster.controller
        acting: dict[int, int] = {}
        for b, broker in c.brokers.items() if changed or not self.incremental else ():
            if not broker.alive:
                continue
            r = broker.replica
            if r.role != "leader":
                continue
            epoch = r.leader_epoch
            if epoch is not None:
                other = acting.get(epoch)
                if other is not None:
                    self.report("Inv-EpochFencing", f"brokers {other} and {b} both lead epoch "
                                f"{epoch}", {"replicas": [other, b], "epoch": epoch}, loss_like=False)
                acting[epoch] = b
        leader = ctrl.leader
        if leader is None:
            return
        broker = c.brokers[leader]
        r = broker.replica
        if not (broker.alive and r.role == "leader" and r.leader_epoch == ctrl.leader_epoch):
            return
        if moved or leader in changed:
            self._check_completeness(leader, r)
        if r.partition_epoch is not None and (moved or any(x in changed for x in (leader, *ctrl.isr))):
            self._check_quorum_superset(leader, r)

    def _check_completeness(self, leader: int, r: Any) -> None:
        """Inv-Durability and Inv-LeaderCompleteness for the controller's leader ``leader``."""
        ctrl = self.cluster.controller
        missing = self._missing_committed(r.log)
        if missing is not None:
            details = {"leader": leader, "epoch": r.leader_epoch, "offset": missing,
                       "true_high_watermark": self.true_hw,
                       "committed": self._record_at(self.truth, missing),
                       "leader_has": self._record_at(r.log, missing),
                       "leader_log_end_offset": r.log.log_end_offset}
            msg = (f"leader {leader} of epoch {r.leader_epoch} lacks committed offset {missing} "
                   f"(value {details['committed']['value']}, trueHW {self.true_hw}); "
                   + ("its log ends before it" if details['leader_has']['value'] is None
                      else f"it holds value {details['leader_has']['value']} there"))
            if (leader, ctrl.leader_epoch) not in self._leaderships and not self._unclean(ctrl.leader_epoch):
                self.report("Inv-LeaderCompleteness", "clean-elected " + msg, details)
            self.report("Inv-Durability", msg, details)
        self._leaderships.add((leader, ctrl.leader_epoch))

    def _check_quorum_superset(self, leader: int, r: Any) -> None:
        """Inv-ReplicationQuorumSuperset for the controller's leader ``leader``."""
        c, ctrl = self.cluster, self.cluster.controller
        maximal = set(r.maximal_isr)
        hw = r.log.high_watermark
        short = [x for x in ctrl.isr if x not in maximal
                 and c.brokers[x].replica.log.log_end_offset < hw]
        if short:
            self.report("Inv-ReplicationQuorumSuperset", f"leader {leader} counts ISR "
                        f"{sorted(maximal)} toward its HW {hw}, but the controller's ISR "
                        f"{list(ctrl.isr)} also holds {short}, which lack offsets below it",
                        {"leader": leader, "epoch": r.leader_epoch, "maximal_isr": sorted(maximal),
                         "controller_isr": list(ctrl.isr), "high_watermark": hw,
                         "behind": {str(x): c.brokers[x].replica.log.log_end_offset for x in short}},
                        loss_like=False)

    def _unclean(self, epoch: int) -> bool:
        return any(e[1] == epoch and self._lossy_election(e) for e in self.cluster.controller.elections)

    # -- 5 ------------------------------------------------------------------------------------
    def _check_log_matching(self, changed: list[int]) -> None:
        brokers = self.cluster.brokers
        ids = sorted(brokers)
        for i, a in enumerate(ids):
            for b in ids[i + 1:]:
                if a not in changed and b not in changed:
                    continue
                la, lb = brokers[a].replica.log, brokers[b].replica.log
                bound = min(la.high_watermark, lb.high_watermark)
                if bound == 0:
                    continue
                m = self.impl.first_mismatch(la, lb)
                if m is not None and m < bound:
                    self.report("Inv-LogMatching", f"brokers {a} and {b} differ at offset {m} below "
                                f"min(HW) = {bound}: {a} has {self._record_at(la, m)}, "
                                f"{b} has {self._record_at(lb, m)}",
                                {"replicas": [a, b], "offset": m, "min_high_watermark": bound,
                                 str(a): self._record_at(la, m), str(b): self._record_at(lb, m)})

    # -- 3, 10, 12 ----------------------------------------------------------------------------
    def _check_isr(self, changed: list[int], ctrl_changed: bool, moved: bool) -> None:
        """``moved``: the controller's key or the truth moved (or the plain form); a member's
        Inv-StrongIsr is asked again when it did, when the member changed, or when a broker
        left the recovering set at the last check."""
        c, ctrl = self.cluster, self.cluster.controller
        brokers, isr, elr = c.brokers, ctrl.isr, ctrl.elr
        every = moved or self._rejoined
        self._rejoined = False
        members = [x for x in c.config.replicas or () if (x in isr or x in elr) and (every or x in changed)]
        for b in members:
            broker = brokers[b]
            if not broker.alive:
                continue
            r = broker.replica
            if r.role not in ("leader", "follower"):
                continue
            if b in self.recovering:
                # restarted after losing its unflushed tail and not caught up: whether it may
                # be in the ISR is Inv-UncleanExclusion's question, asked once the controller
                # knows the new incarnation (KIP-903/966); until then the ISR entry names the
                # incarnation that had the data
                continue
            missing = self._missing_committed(r.log)
            if missing is not None:
                self.report("Inv-StrongIsr", f"ISR member {b} lacks committed offset {missing} "
                            f"(trueHW {self.true_hw})",
                            {"replica": b, "offset": missing, "true_high_watermark": self.true_hw,
                             "committed": self._record_at(self.truth, missing),
                             "replica_has": self._record_at(r.log, missing),
                             "isr": list(ctrl.isr), "epoch": ctrl.leader_epoch})
        for b in sorted(self.recovering):
            broker = c.brokers[b]
            if not broker.alive:
                continue
            leo = broker.replica.log.log_end_offset
            if leo >= self.true_hw:
                if not self._believed_beyond(b, leo):
                    self.recovering.discard(b)
                    self._rejoined = True
                continue
            known = ctrl.incarnation.get(b) == broker.incarnation and ctrl.live.get(b, False)
            if known and (b == ctrl.leader or b in ctrl.isr or b in ctrl.elr):
                where = "leader" if b == ctrl.leader else "ISR/ELR"
                self.report("Inv-UncleanExclusion", f"broker {b} restarted after losing its "
                            f"unflushed tail is {where} with LEO {broker.replica.log.log_end_offset} "
                            f"< trueHW {self.true_hw}",
                            {"replica": b, "log_end_offset": broker.replica.log.log_end_offset,
                             "true_high_watermark": self.true_hw, "isr": list(ctrl.isr),
                             "leader": ctrl.leader})
        if ctrl_changed:
            added = [x for x in ctrl.isr if x not in self._last_isr]
            self._last_isr = tuple(ctrl.isr)
            leader = ctrl.leader
            if leader is None or not added:
                return
            lr = c.brokers[leader].replica
            leso = lr.leader_epoch_start_offset if lr.role == "leader" else None
            for x in added:
                # a crashed (or lossy-restarted) broker's LEO now says nothing about the fetch
                # that got it into the ISR; Inv-UncleanExclusion covers the lossy case
                if x == leader or leso is None or not c.brokers[x].alive or x in self.recovering:
                    continue
                if ctrl.incarnation.get(x) != c.brokers[x].incarnation:
                    # the ISR entry names the incarnation whose fetches got it there (the
                    # AlterPartition carried its broker epoch, KIP-903); the process has
                    # restarted since and its log says nothing about that join
                    continue
                leo = c.brokers[x].replica.log.log_end_offset
                if leo < leso:
                    self.report("Inv-IsrJoin", f"broker {x} joined the ISR of leader {leader} "
                                f"(epoch {ctrl.leader_epoch}) with LEO {leo} < LESO {leso}",
                                {"replica": x, "leader": leader, "epoch": ctrl.leader_epoch,
                                 "log_end_offset": leo, "leader_epoch_start_offset": leso},
                                loss_like=False)
