"""The simulated consumer: one partition, fixed assignment, fetch from the leader (or, with
fetch from follower, from the replica the leader names).

A background fetcher fills a buffer; :meth:`Consumer.poll` hands the buffer to the application
and advances the consumed position. The fetcher has one request in flight at a time and sends
the next one as soon as an answer has been taken (records, a redirect, a reset, a validation),
while the buffer holds fewer than ``fetch_max_records`` (a poll that makes room sends it), as
the Java consumer's poll loop does (``Fetcher.sendFetches`` in every ``poll``). Fetches long
poll: the broker holds one that finds nothing to read for up to ``fetch_max_wait_ms``
(``fetch.max.wait.ms``, ``DelayedFetch``), so an idle consumer costs one round trip per wait
instead of a stream of empty fetches. After an error, a failed request, no known leader or an
empty answer that came back sooner than ``poll_interval_ms`` (the broker answers at once when
the position is above its HW, ``DelayedFetch`` case F, e.g. a new leader whose HW is still
catching up), the next attempt waits ``poll_interval_ms``: Java's consumer asks again at once,
a busy loop bounded by the round trip; the pause keeps the same reads at fewer events.

Reads stop below the leader's HW (read_uncommitted) or its last stable offset
(``isolation_level="read_committed"``, ``docs/core-semantics.md`` rule 1.12). Control records (transaction
markers) are never delivered; the position steps over them. A read_committed consumer drops
aborted data as Kafka's fetcher does: the fetch response lists the aborted transactions ``(producer id, first offset)`` of the
range; walking the records in offset order, a producer becomes "aborted" at its first offset
and stops being so at its ABORT marker, and its transactional records in between are dropped.

ListOffsets (:meth:`Consumer.list_offsets`, Java's ``endOffsets`` / ``beginningOffsets``): a
request to the leader for the latest offset (the HW; the LSO for read_committed) or the
earliest (the log start), apart from the fetcher; retried after ``retry.backoff.ms`` on a
leader error (after a metadata refresh) and on OFFSET_NOT_AVAILABLE (a new leader whose HW is
still below its epoch's start offset, KIP-207, 2.2+), for up to ``default.api.timeout.ms``.
History: ``invoke`` ``list_offsets`` with the spec, then ``ok`` with ``[spec, offset]``
(spec ``"latest"``, ``"latest-committed"`` for read_committed, or ``"earliest"``) or ``info``
with the error after the timeout.

Offsets: the start position is the committed offset (OffsetFetch; the controller plays the
group coordinator), else ``auto_offset_reset`` (earliest = log start, latest = HW; ``none``
records an ``info`` poll with ``NO_OFFSET_FOR_PARTITION`` and stops). Auto-commit commits the
consumed position every ``auto_commit_interval_ms`` (a timer instead of Java's check inside
``poll``); :meth:`commit` commits it now. A crash loses the buffer and position; the restart
resumes from the committed offset, so records consumed after the last commit are processed
again. OFFSET_OUT_OF_RANGE resets by ``auto_offset_reset``.

KIP-320 (G3+, consumer 2.3+): fetches carry the current leader epoch; after learning a newer
leader epoch the consumer validates its position with OffsetsForLeaderEpoch for the epoch of
the last consumed record. Commits carry that epoch too, and a position restored from a
committed offset is validated the same way before the first fetch (``seekUnvalidated``).
The leader answers its end offset for the epoch, uncapped (``Partition.lastOffsetForLeaderEpoch``);
the consumer reacts as ``SubscriptionState.maybeCompleteValidation`` does: an end offset below
the position means the log was truncated under it (an ``info`` poll op with error
``LOG_TRUNCATION`` and ``offset`` = the end offset); with an ``auto_offset_reset`` policy the
position moves back to that end offset, with ``none`` the consumer stops (Java raises
``LogTruncationException``). An UNDEFINED answer (the epoch is unknown to the leader) resets
the position by the policy, or with ``none`` also stops with ``LOG_TRUNCATION``.

Fetch from follower (KIP-392, 2.4+, G3 on; off unless the cluster sets
``replica.selector.class`` and the consumer a ``client_rack``): fetches carry the rack; a
leader whose selector picks a follower answers with no records and that
``preferred_read_replica``; the consumer then fetches from it (its records up to its own HW)
until ``metadata.max.age.ms`` after it was named (``SubscriptionState.preferredReadReplica``),
and goes back to the leader on NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH,
OFFSET_NOT_AVAILABLE (``requestMetadataUpdate`` clears it), OFFSET_OUT_OF_RANGE (cleared
instead of a reset), a failed request, a replica that is offline, or a new leader or epoch
(``maybeValidatePosition``), as the Java consumer's ``Fetcher`` does (3.4.0). ListOffsets
and position validation always go to the leader. A consumer with a rack records ``info``
``fetch_from`` with the broker id in the history each time the broker it fetches from changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from epochlab.errors import ConfigError
from epochlab.sim.backoff import RETRY_BACKOFF_MAX_MS, ExponentialBackoff, MetadataBackoff
from epochlab.sim.config import ConsumerConfig
from epochlab.sim.messages import (
    RECORD_ABORT_MARKER,
    RECORD_TRANSACTIONAL,
    ConsumerFetchRequest,
    ConsumerFetchResponse,
    is_list_spec,
)

if TYPE_CHECKING:
    from epochlab.sim.context import SimContext
    from epochlab.sim.kernel import Timer

__all__ = ["Consumer"]

REQUEST_TIMEOUT_MS = 30000
METADATA_TIMEOUT_MS = 1000
#: ``default.api.timeout.ms``: how long ``endOffsets`` / ``beginningOffsets`` keep retrying.
API_TIMEOUT_MS = 60000
#: ``retry.backoff.ms`` of the consumer's ListOffsets retries.
RETRY_BACKOFF_MS = 100


class Consumer:
    """A consumer client named ``name`` (its network node and its group)."""

    #: its events change no broker or controller state (``Kernel``: quiet events)
    QUIET = True

    def __init__(self, ctx: SimContext, name: str, config: ConsumerConfig) -> None:
        self.ctx = ctx
        self.name = name
        self.config = config
        self.session = 0
        self._ids = 0
        self.alive = False
        self.start()

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        self.session += 1
        self.alive = True
        self.ctx.network.set_alive(self.name, True)
        self.position: int | None = None      # next offset to fetch
        self.consumed: int | None = None      # next offset after what poll() returned
        self.committed: int | None = None
        self.last_consumed_epoch: int | None = None
        self._buffer: list[tuple[int, int, int]] = []
        self._leader: int | None = None
        self._leader_epoch: int | None = None
        self._validate = False
        self._stopped = False
        self._ready = False
        self._pending: int | None = None
        self._fetching_from: tuple[int, int] | None = None  # (broker, request id) of a fetch
        # KIP-392: (replica, expiry ms) the leader named; (leader, epoch) the position is for
        self._preferred: tuple[int, int] | None = None
        self._current_leader: tuple[int, int] | None = None
        self._fetch_from: int | None = None  # the broker fetched from last (recorded with a rack)
        self._listing: tuple[int, str | int, int, int] | None = None  # ListOffsets: id, spec, deadline, session
        # G5 (Java clients 3.7+, KIP-580): metadata requests back off exponentially; the
        # consumer's retry.backoff.ms is the default 100 ms
        self._metadata_backoff = (
            MetadataBackoff(ExponentialBackoff(RETRY_BACKOFF_MS, RETRY_BACKOFF_MAX_MS,
                                               self.ctx.kernel.rng(f"{self.name}:backoff")))
            if self.ctx.generation.client_exponential_backoff else None)
        self._metadata_id: int | None = None
        self._fetch_timer: Timer | None = None     # the fetcher's next turn
        self._timeout_timer: Timer | None = None   # the request timeout of ``_pending``
        self._sent_ms = 0                          # when the pending fetch was sent
        self._offset_fetch()
        session = self.session
        if self.config.enable_auto_commit:
            self._every(self.config.auto_commit_interval_ms, self._auto_commit, session)

    def crash(self) -> None:
        """The consumer process dies: buffer and position are lost."""
        if not self.alive:
            return
        self.ctx.record(self.name, "info", "crash")
        self.alive = False
        self.session += 1
        for timer in (self._fetch_timer, self._timeout_timer):
            if timer is not None:
                timer.cancel()
        self.ctx.network.set_alive(self.name, False)

    def restart(self) -> None:
        """Start again from the committed offset (crashing first if still running)."""
        if self.alive:
            self.crash()
        self.ctx.record(self.name, "info", "restart")
        self.start()

    def _every(self, period_ms: int, action: object, session: int) -> None:
        def tick() -> None:
            if self.session == session:
                action()  # type: ignore[operator]
                self.ctx.kernel.schedule(period_ms, tick)
        self.ctx.kernel.schedule(period_ms, tick)

    def _next_id(self) -> int:
        self._ids += 1
        return self._ids

    # -- application API --------------------------------------------------------------------
    def poll(self) -> list[tuple[int, int]]:
        """Records fetched so far, in offset order (at most ``fetch_max_records``); records
        an ``invoke`` and an ``ok`` poll op. Empty if the consumer is down."""
        if not self.alive:
            return []
        self.ctx.record(self.name, "invoke", "poll")
        out, self._buffer = (self._buffer[:self.config.fetch_max_records],
                             self._buffer[self.config.fetch_max_records:])
        if out:
            self.consumed = out[-1][0] + 1
            self.last_consumed_epoch = out[-1][2]
        records = [(o, v) for o, v, _ in out]
        self.ctx.record(self.name, "ok", "poll", value=[[o, v] for o, v in records])
        if out:
            self._arm_fetcher(0)  # room in the buffer: a fetcher that had stopped goes on
        return records

    def seek(self, offset: int) -> None:
        """``KafkaConsumer.seek``: fetch from ``offset`` next (no leader epoch, so nothing to
        validate); also restarts a consumer stopped by a missing offset or a truncation."""
        if not self.alive:
            return
        self.ctx.record(self.name, "info", "seek", value=offset)
        self.position = self.consumed = offset
        self.last_consumed_epoch = None
        self._validate = self._stopped = False
        self._buffer.clear()
        self._arm_fetcher(0)

    def commit(self) -> None:
        """Commit the consumed position now (``invoke``, then ``ok`` when acknowledged)."""
        if self.alive and self.consumed is not None:
            self._commit(self.consumed)

    def _auto_commit(self) -> None:
        if self.consumed is not None and self.consumed != self.committed:
            self._commit(self.consumed)

    def _commit(self, offset: int) -> None:
        self.ctx.record(self.name, "invoke", "commit", value=offset)
        epoch = self.last_consumed_epoch if self.ctx.generation.fences_current_epoch else None
        self.ctx.post(self.name, "controller", "on_offset_commit",
                      (self.name, self._next_id(), offset, epoch))

    def on_offset_commit_response(self, msg: tuple[int, int], src: object) -> None:
        _, offset = msg
        self.committed = offset
        self.ctx.record(self.name, "ok", "commit", value=offset)

    # -- offsets and metadata ---------------------------------------------------------------
    def _offset_fetch(self) -> None:
        request_id = self._pending = self._next_id()
        self.ctx.post(self.name, "controller", "on_offset_fetch", (self.name, request_id))
        self._arm_timeout(request_id, METADATA_TIMEOUT_MS)

    def on_offset_fetch_response(self, msg: tuple[int, tuple[int, int | None] | None],
                                 src: object) -> None:
        request_id, committed = msg
        if not self._answered(request_id):
            return
        self._ready = True
        self._arm_fetcher(0)
        offset, epoch = committed if committed is not None else (None, None)
        self.committed = offset
        self.position = self.consumed = offset
        if epoch is not None:  # seekUnvalidated: validate before the first fetch
            self.last_consumed_epoch = epoch
            self._validate = True

    def _arm_timeout(self, request_id: int, timeout_ms: int) -> None:
        session = self.session

        def expire() -> None:
            if session == self.session and self._pending == request_id:
                self._pending = self._timeout_timer = None
                if request_id == self._metadata_id and self._metadata_backoff is not None:
                    self._metadata_backoff.failed(self.ctx.now_ms)  # Metadata.failedUpdate
                if not self._ready:
                    self._offset_fetch()
                    return
                if self._leader is not None:
                    self._clear_preferred("request timed out")
                    self._leader = None
                self._arm_fetcher(self.config.poll_interval_ms)
        self._timeout_timer = self.ctx.kernel.schedule(timeout_ms, expire)

    def _answered(self, request_id: int) -> bool:
        """Whether ``request_id`` is the request in flight; if so it is settled (no longer
        pending, its timeout cancelled)."""
        if request_id != self._pending:
            return False
        self._pending = None
        if self._timeout_timer is not None:
            self._timeout_timer.cancel()
            self._timeout_timer = None
        return True

    def _arm_fetcher(self, delay_ms: int) -> None:
        """Give the fetcher a turn ``delay_ms`` from now, unless one comes sooner. At most one
        turn is pending; a turn that sends no request and is not waiting for an answer or for
        room in the buffer schedules the next itself (:meth:`_fetch`)."""
        if not self.alive or self._stopped:
            return
        timer = self._fetch_timer
        due = self.ctx.now_ms + max(0, delay_ms)
        if timer is not None and not timer.cancelled:
            if timer.time_ms <= due:
                return
            timer.cancel()
        session = self.session

        def turn() -> None:
            if self.session == session:
                self._fetch_timer = None
                self._fetch()
        self._fetch_timer = self.ctx.kernel.schedule_at(due, turn)

    def on_metadata_response(self, msg: tuple[int, int | None, int], src: object) -> None:
        request_id, leader, epoch = msg
        if self._listing is not None and request_id == self._listing[0]:
            if leader is not None:
                self._leader, self._leader_epoch = leader, epoch
            return
        if not self._answered(request_id):
            return
        if self._metadata_backoff is not None:
            self._metadata_backoff.answered(self.ctx.now_ms, epoch)
        if leader is None:
            self._arm_fetcher(self.config.poll_interval_ms)
            return
        self._arm_fetcher(0)
        if self._leader_epoch is not None and epoch > self._leader_epoch \
                and self.ctx.generation.fences_current_epoch and self.last_consumed_epoch is not None:
            self._validate = True
        if self._current_leader is not None and self._current_leader != (leader, epoch):
            self._clear_preferred(f"new leader {leader} epoch {epoch}")  # maybeValidatePosition
        self._current_leader = (leader, epoch)
        self._leader, self._leader_epoch = leader, epoch

    # -- fetch from follower (KIP-392) --------------------------------------------------------
    def _read_target(self) -> int | None:
        """``Fetcher.selectReadReplica``: the preferred read replica while it has not expired
        (``SubscriptionState.preferredReadReplica``) and is online, else the leader. Position
        validation always asks the leader."""
        pref = self._preferred
        if pref is None or self._validate:
            return self._leader
        if self.ctx.now_ms > pref[1]:
            self._clear_preferred("preferred read replica expired (metadata.max.age.ms)")
            return self._leader
        if not self.ctx.network.is_alive(pref[0]):
            self._clear_preferred(f"preferred read replica {pref[0]} offline")
            return self._leader
        return pref[0]

    def _clear_preferred(self, why: str) -> bool:
        """``SubscriptionState.clearPreferredReadReplica``; whether there was one."""
        if self._preferred is None:
            return False
        self.ctx.log_event("client", f"consumer {self.name}: reads from the leader again "
                           f"(was replica {self._preferred[0]}): {why}")
        self._preferred = None
        return True

    # -- fetching ---------------------------------------------------------------------------
    def _fetch(self) -> None:
        """One fetcher turn: metadata, reset, validation or a fetch, one request at a time.
        The answer to what it sends (or the request's timeout) gives the next turn; a poll
        that makes room in a full buffer does."""
        if self._pending is not None or not self._ready or self._stopped:
            return
        if len(self._buffer) >= self.config.fetch_max_records:
            return
        if self._leader is None and self._metadata_backoff is not None:
            wait = self._metadata_backoff.wait_ms(self.ctx.now_ms)
            if wait > 0:  # Metadata.timeToAllowUpdate: not yet (G5, KIP-580)
                self._arm_fetcher(wait)
                return
        request_id = self._pending = self._next_id()
        if self._leader is None:
            self._metadata_id = request_id
            self.ctx.post(self.name, "controller", "on_metadata", (self.name, request_id))
            self._arm_timeout(request_id, METADATA_TIMEOUT_MS)
            return
        if self.position is None and self.config.auto_offset_reset == "none":
            self._pending = None
            self._stopped = True
            self.ctx.record(self.name, "info", "poll", error="NO_OFFSET_FOR_PARTITION")
            return
        current = self._leader_epoch if self.ctx.generation.fences_current_epoch else None
        validate = self.last_consumed_epoch if self._validate else None
        # ``reset`` is read only for a ListOffsets request (no position), which a consumer
        # without a reset policy never sends.
        reset = "latest" if self.config.auto_offset_reset == "none" else self.config.auto_offset_reset
        # only a fetch of records waits at the broker (not a ListOffsets, not a validation)
        max_wait = self.config.fetch_max_wait_ms if self.position is not None and validate is None else 0
        req = ConsumerFetchRequest(self.name, request_id, self.position, current,
                                   self.config.fetch_max_records, reset,
                                   validate, self.config.isolation_level, self.config.client_rack,
                                   max_wait)
        target = self._read_target()
        assert target is not None
        if not self.ctx.network.is_alive(target):
            self._pending, self._leader = None, None
            self._arm_fetcher(self.config.poll_interval_ms)
            return
        self.ctx.post(self.name, target, "on_consumer_fetch", req)
        self._fetching_from = (target, request_id)
        self._sent_ms = self.ctx.now_ms
        if self.config.client_rack is not None and target != self._fetch_from:
            # history: ``info fetch_from`` with the broker, each time the fetch source changes
            # (only for a consumer with a rack, so runs without one keep their history)
            self._fetch_from = target
            self.ctx.record(self.name, "info", "fetch_from", value=target)
        self._arm_timeout(request_id, REQUEST_TIMEOUT_MS)

    def on_connection_reset(self, broker: object, src: object) -> None:
        """The leader it fetches from died as a process (``SimContext.reset_connections``):
        the fetch in flight fails at once (``NetworkClient.handleDisconnections``) and the
        next poll looks the leader up again, as for a refused connection."""
        if self._pending is not None and self._fetching_from == (broker, self._pending):
            self._answered(self._pending)
            if not (self._preferred is not None and self._preferred[0] == broker
                    and self._clear_preferred(f"connection to {broker} reset")):
                self._leader = None
            self._arm_fetcher(self.config.poll_interval_ms)

    # -- ListOffsets --------------------------------------------------------------------------
    def list_offsets(self, spec: str | int = "latest") -> None:
        """Ask the leader for the latest (``"latest"``) or earliest (``"earliest"``) offset,
        as ``KafkaConsumer.endOffsets`` / ``beginningOffsets`` do (module doc), or, for an int
        ``spec``, the first offset whose record's timestamp is at least that many ms
        (``KafkaConsumer.offsetsForTimes``; records carry the leader's append time); the
        answer is recorded in the history when it comes (-1: no such record below the
        last fetchable offset, Java's ``null``). One request at a time: a second call while
        one is pending replaces it (the first is recorded ``info`` ``SUPERSEDED``)."""
        if not is_list_spec(spec):
            raise ConfigError(f"list_offsets: spec must be 'latest', 'earliest' or a timestamp "
                              f"(an int in [0, 2^63-1]), got {spec!r}",
                              where=f"consumer {self.name}", field="spec",
                              expected="latest, earliest or a timestamp", got=repr(spec))
        if not self.alive:
            return
        if spec == "latest" and self.config.isolation_level == "read_committed":
            spec = "latest-committed"
        if self._listing is not None:
            self.ctx.record(self.name, "info", "list_offsets", value=self._listing[1], error="SUPERSEDED")
        self.ctx.record(self.name, "invoke", "list_offsets", value=spec)
        self._listing = (self._next_id(), spec, self.ctx.now_ms + API_TIMEOUT_MS, self.session)
        self._send_list_offsets(self._listing[0])

    def _send_list_offsets(self, request_id: int) -> None:
        listing = self._listing
        if listing is None or listing[0] != request_id or listing[3] != self.session:
            return
        _, spec, deadline, session = listing
        if self.ctx.now_ms >= deadline:
            self._listing = None
            self.ctx.record(self.name, "info", "list_offsets", value=spec, error="TIMEOUT")
            return
        rid = self._listing = (self._next_id(), spec, deadline, session)
        leader = self._leader
        if leader is not None and not self.ctx.network.is_alive(leader):
            leader = self._leader = None  # connection refused: look the leader up again
        if leader is None:
            self.ctx.post(self.name, "controller", "on_metadata", (self.name, rid[0]))
        else:
            current = self._leader_epoch if self.ctx.generation.fences_current_epoch else None
            by_time = isinstance(spec, int)
            req = ConsumerFetchRequest(self.name, rid[0], None, current, 0,
                                       "timestamp" if by_time else "earliest" if spec == "earliest" else "latest",
                                       None, self.config.isolation_level,
                                       reset_timestamp=spec if by_time else None)
            self.ctx.post(self.name, leader, "on_consumer_fetch", req)
        # a metadata answer, a retriable error or no answer at all: ask again after the backoff
        # (an answer cancels this by replacing the request id)
        wait = RETRY_BACKOFF_MS if leader is None else REQUEST_TIMEOUT_MS
        self.ctx.kernel.schedule(wait, lambda: self._send_list_offsets(rid[0]))

    def _on_list_offsets_response(self, resp: ConsumerFetchResponse) -> None:
        assert self._listing is not None
        _, spec, deadline, session = self._listing
        if resp.error is None and (resp.reset_offset is not None or isinstance(spec, int)):
            self._listing = None
            offset = -1 if resp.reset_offset is None else resp.reset_offset
            self.ctx.record(self.name, "ok", "list_offsets", value=[spec, offset])
            return
        if resp.error == "UNSUPPORTED_VERSION":
            self._listing = None
            self.ctx.record(self.name, "fail", "list_offsets", value=spec, error=resp.error)
            return
        self.ctx.log_event("client", f"consumer {self.name}: ListOffsets {spec}: {resp.error}, retrying")
        if resp.error in ("NOT_LEADER_OR_FOLLOWER", "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH"):
            self._leader = None
        retry = self._listing = (self._next_id(), spec, deadline, session)
        self.ctx.kernel.schedule(RETRY_BACKOFF_MS, lambda: self._send_list_offsets(retry[0]))

    def on_fetch_response(self, resp: ConsumerFetchResponse, src: object) -> None:
        if self._listing is not None and resp.request_id == self._listing[0]:
            self._on_list_offsets_response(resp)
            return
        if not self._answered(resp.request_id):
            return
        # the next turn: at once after an answer that moved things on (records, a redirect, a
        # reset, a validation) or an empty one the broker held; else after poll_interval_ms
        # from the send (module doc)
        moved_on = resp.error is None and (resp.records or resp.preferred_read_replica is not None
                                           or resp.reset_offset is not None or self._validate)
        self._arm_fetcher(0 if moved_on else self._sent_ms + self.config.poll_interval_ms - self.ctx.now_ms)
        if resp.error in ("NOT_LEADER_OR_FOLLOWER", "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH"):
            if resp.error != "UNKNOWN_LEADER_EPOCH":
                self._clear_preferred(resp.error)  # requestMetadataUpdate clears it
            self._leader = None
        elif resp.error == "OFFSET_OUT_OF_RANGE":
            # from the preferred replica: read from the leader instead of resetting
            if not self._clear_preferred("OFFSET_OUT_OF_RANGE"):
                self._reset("OFFSET_OUT_OF_RANGE")
        elif resp.error == "OFFSET_NOT_AVAILABLE":
            self._clear_preferred(resp.error)
            # KIP-207: the new leader's HW is behind its epoch start; ask again next tick
        elif resp.error is None and resp.preferred_read_replica is not None:
            replica = resp.preferred_read_replica
            if self._preferred is None or self._preferred[0] != replica:
                # updatePreferredReadReplica: the expiry is set only when the replica changes
                self._preferred = (replica, self.ctx.now_ms + self.config.metadata_max_age_ms)
                self.ctx.log_event("client", f"consumer {self.name}: leader names replica {replica} "
                                   f"as preferred read replica (rack {self.config.client_rack})")
        elif resp.error is None and resp.reset_offset is not None:
            self.position = self.consumed = resp.reset_offset
        elif resp.error is None and self._validate:
            self._validate = False
            self._check_truncation(resp.epoch_end)
        elif resp.error is None:
            self._take(resp.records, resp.aborted_transactions)

    def _reset(self, why: str) -> None:
        self.ctx.log_event("client", f"consumer {self.name}: {why} at {self.position}, "
                           f"reset {self.config.auto_offset_reset}")
        if self.config.auto_offset_reset == "none":
            self._stopped = True
            self.ctx.record(self.name, "info", "poll", error=why)
            return
        self.position = None
        self._buffer.clear()

    def _check_truncation(self, epoch_end: tuple[int, int] | None) -> None:
        """``SubscriptionState.maybeCompleteValidation`` (module doc)."""
        position = self.consumed
        if position is None:
            return
        if epoch_end is None:
            self.ctx.log_event("client", f"consumer {self.name}: epoch {self.last_consumed_epoch} "
                               f"of position {position} unknown to the leader")
            if self.config.auto_offset_reset == "none":
                self._stopped = True
                self.ctx.record(self.name, "info", "poll", error="LOG_TRUNCATION")
                return
            self._reset("UNDEFINED_EPOCH_OFFSET")
            return
        if epoch_end[1] >= position:
            return
        end = epoch_end[1]
        self.ctx.record(self.name, "info", "poll", offset=end, error="LOG_TRUNCATION")
        self.ctx.log_event("client", f"consumer {self.name}: truncation detected, position "
                           f"{position} > end offset {end} of epoch {self.last_consumed_epoch}")
        if self.config.auto_offset_reset == "none":
            self._stopped = True
            return
        self.position = self.consumed = end
        self.last_consumed_epoch = epoch_end[0]
        self._buffer.clear()

    def _take(self, records: tuple[tuple[int, int, int, int | None, int], ...],
              aborted: tuple[tuple[int, int], ...] = ()) -> None:
        upcoming = sorted(aborted, key=lambda a: a[1])
        aborting: set[int | None] = set()
        for offset, value, epoch, producer_id, kind in records:
            if self.position is None or offset != self.position:
                continue
            self.position = offset + 1
            while upcoming and upcoming[0][1] <= offset:
                aborting.add(upcoming.pop(0)[0])
            if kind >= RECORD_ABORT_MARKER:
                if kind == RECORD_ABORT_MARKER:
                    aborting.discard(producer_id)
                continue
            if kind == RECORD_TRANSACTIONAL and producer_id in aborting:
                continue
            self._buffer.append((offset, value, epoch))
