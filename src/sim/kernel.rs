//! The event kernel: virtual time in integer milliseconds and one queue of events ordered by
//! `(time, sequence)`, generic over what an event carries.
//!
//! * Two events due at the same millisecond run in the order they were scheduled (the
//!   sequence number breaks the tie), so a run depends only on the calls made.
//! * Time never goes back: an event scheduled in the past is due now; popping an event moves
//!   the clock to its time.
//! * Cancellation is the payload's ([`Payload::cancelled`]): a cancelled event stays queued
//!   until it reaches the front, where it is skipped. The kernel never drops a payload it lets
//!   go of: a skipped one waits in [`Kernel::take_discarded`] for its owner to drop it at a
//!   time of its choosing (the Python bindings drop theirs with no lock held).
//! * Quietness: an event is scheduled quiet or not; [`Kernel::in_quiet`] tells whether the
//!   running event is quiet (what a timer scheduled during it inherits by default) and
//!   [`Kernel::last_quiet`] whether the last event run was (`epochlab.sim.kernel` doc: the
//!   state checker has nothing new to read after a quiet event). Quietness changes no order.
//!
//! ```
//! use epochlab::sim::kernel::{Kernel, Payload};
//! struct Say(&'static str);
//! impl Payload for Say {}
//! let mut k = Kernel::new();
//! k.schedule_at(5, Some(false), Say("b"));
//! k.schedule_at(5, Some(false), Say("c"));
//! k.schedule_at(1, Some(false), Say("a"));
//! let mut out = Vec::new();
//! k.run_until(10, |_, e| { out.push(e.0); false });
//! assert_eq!((out, k.now()), (vec!["a", "b", "c"], 10));
//! ```

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// What an event carries. The default is an event that cannot be cancelled.
pub trait Payload {
    /// Whether the event was cancelled: skipped when it reaches the front of the queue.
    fn cancelled(&self) -> bool {
        false
    }
}

/// Where and how an event was queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scheduled {
    /// The time it is due (the requested time, clamped to now).
    pub time: i64,
    /// Its place among the events due at that time.
    pub sequence: u64,
    pub quiet: bool,
}

struct Entry<E> {
    time: i64,
    seq: u64,
    quiet: bool,
    payload: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.time, self.seq) == (other.time, other.seq)
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Entry<E> {
    /// Reversed: `BinaryHeap` is a max-heap, the earliest `(time, sequence)` must come first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.time, other.seq).cmp(&(self.time, self.seq))
    }
}

/// Virtual clock and event queue (module doc).
pub struct Kernel<E> {
    now: i64,
    sequence: u64,
    steps: u64,
    last_quiet: bool,
    in_quiet: bool,
    queue: BinaryHeap<Entry<E>>,
    discarded: Vec<E>,
}

impl<E: Payload> Default for Kernel<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E: Payload> Kernel<E> {
    /// At time 0 with nothing queued.
    pub fn new() -> Self {
        Kernel { now: 0, sequence: 0, steps: 0, last_quiet: false, in_quiet: false, queue: BinaryHeap::new(), discarded: Vec::new() }
    }

    /// The virtual time in ms.
    pub fn now(&self) -> i64 {
        self.now
    }
    /// Events run (popped) so far.
    pub fn steps(&self) -> u64 {
        self.steps
    }
    /// Whether the last event popped was quiet.
    pub fn last_quiet(&self) -> bool {
        self.last_quiet
    }
    /// Forget the last event's quietness (a new run starts: what came before is news).
    pub fn clear_last_quiet(&mut self) {
        self.last_quiet = false;
    }
    /// Whether the event being run is quiet (until [`Kernel::end_event`]).
    pub fn in_quiet(&self) -> bool {
        self.in_quiet
    }
    /// Events queued, cancelled ones not yet skipped included.
    pub fn pending(&self) -> usize {
        self.queue.len()
    }

    /// Queue `payload` at `time` (clamped to now); `quiet` defaults to [`Kernel::in_quiet`].
    pub fn schedule_at(&mut self, time: i64, quiet: Option<bool>, payload: E) -> Scheduled {
        let quiet = quiet.unwrap_or(self.in_quiet);
        self.sequence += 1;
        let time = time.max(self.now);
        self.queue.push(Entry { time, seq: self.sequence, quiet, payload });
        Scheduled { time, sequence: self.sequence, quiet }
    }

    /// Queue `payload` `delay_ms` after now (a negative delay counts as 0).
    pub fn schedule(&mut self, delay_ms: i64, quiet: Option<bool>, payload: E) -> Scheduled {
        self.schedule_at(self.now.saturating_add(delay_ms.max(0)), quiet, payload)
    }

    /// The time of the earliest event that is not cancelled; cancelled ones in front of it
    /// leave the queue for [`Kernel::take_discarded`].
    pub fn next_time(&mut self) -> Option<i64> {
        while self.queue.peek().is_some_and(|e| e.payload.cancelled()) {
            if let Some(e) = self.queue.pop() {
                self.discarded.push(e.payload);
            }
        }
        self.queue.peek().map(|e| e.time)
    }

    /// Take the earliest event due at or before `limit` (any, with `None`), moving the clock
    /// to its time and the quietness to its own; the caller runs it, then calls
    /// [`Kernel::end_event`].
    pub fn pop(&mut self, limit: Option<i64>) -> Option<E> {
        let due = self.next_time()?;
        if limit.is_some_and(|l| due > l) {
            return None;
        }
        let e = self.queue.pop()?;
        self.now = e.time;
        self.steps += 1;
        self.in_quiet = e.quiet;
        self.last_quiet = e.quiet;
        Some(e.payload)
    }

    /// The popped event has run: what is scheduled from now on is not quiet by default.
    pub fn end_event(&mut self) {
        self.in_quiet = false;
    }

    /// Move the clock to `time` unless it is already later (the end of a run).
    pub fn advance_to(&mut self, time: i64) {
        self.now = self.now.max(time);
    }

    /// Run every event due at or before `limit` through `run` (which may schedule more);
    /// the clock ends at `limit` unless `run` returned true (stop) first. Returns whether
    /// it stopped.
    pub fn run_until(&mut self, limit: i64, mut run: impl FnMut(&mut Self, E) -> bool) -> bool {
        self.clear_last_quiet();
        while let Some(e) = self.pop(Some(limit)) {
            let stop = run(self, e);
            self.end_event();
            if stop {
                return true;
            }
        }
        self.advance_to(limit);
        false
    }

    /// The payloads of skipped cancelled events, for the caller to drop.
    pub fn take_discarded(&mut self) -> Vec<E> {
        std::mem::take(&mut self.discarded)
    }

    /// Every queued payload, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &E> {
        self.queue.iter().map(|e| &e.payload).chain(&self.discarded)
    }

    /// Empty the queue, handing back what was in it (in no particular order).
    pub fn take_pending(&mut self) -> Vec<E> {
        let mut out: Vec<E> = std::mem::take(&mut self.queue).into_vec().into_iter().map(|e| e.payload).collect();
        out.append(&mut self.discarded);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    /// A labelled event with a cancellation flag its scheduler keeps.
    struct Ev {
        label: u32,
        cancel: Rc<Cell<bool>>,
    }
    impl Payload for Ev {
        fn cancelled(&self) -> bool {
            self.cancel.get()
        }
    }
    fn ev(label: u32) -> (Ev, Rc<Cell<bool>>) {
        let cancel = Rc::new(Cell::new(false));
        (Ev { label, cancel: cancel.clone() }, cancel)
    }
    fn at(k: &mut Kernel<Ev>, time: i64, label: u32) -> Rc<Cell<bool>> {
        let (e, c) = ev(label);
        k.schedule_at(time, None, e);
        c
    }
    fn drain(k: &mut Kernel<Ev>, limit: i64) -> Vec<(i64, u32)> {
        let mut out = Vec::new();
        k.run_until(limit, |k, e| {
            out.push((k.now(), e.label));
            false
        });
        out
    }

    #[test]
    fn orders_by_time_then_by_scheduling() {
        let mut k = Kernel::new();
        for (t, l) in [(5, 1), (3, 2), (5, 3), (3, 4), (0, 5), (5, 6)] {
            at(&mut k, t, l);
        }
        assert_eq!(drain(&mut k, 100), [(0, 5), (3, 2), (3, 4), (5, 1), (5, 3), (5, 6)]);
        assert_eq!((k.now(), k.steps()), (100, 6));
    }

    #[test]
    fn the_past_is_due_now_and_ties_go_after_what_is_queued() {
        let mut k = Kernel::new();
        at(&mut k, 10, 1);
        at(&mut k, 10, 2);
        let mut out = Vec::new();
        k.run_until(50, |k, e| {
            out.push((k.now(), e.label));
            if e.label == 1 {
                // scheduled during an event, into the past and at the same time
                let (a, _) = ev(10);
                let s = k.schedule_at(3, None, a);
                assert_eq!(s.time, 10);
                let (b, _) = ev(11);
                k.schedule(-5, None, b);
                let (c, _) = ev(12);
                k.schedule(7, None, c);
            }
            false
        });
        assert_eq!(out, [(10, 1), (10, 2), (10, 10), (10, 11), (17, 12)]);
    }

    #[test]
    fn the_clock_stops_at_the_limit_and_later_events_wait() {
        let mut k = Kernel::new();
        at(&mut k, 4, 1);
        at(&mut k, 9, 2);
        assert_eq!(drain(&mut k, 8), [(4, 1)]);
        assert_eq!((k.now(), k.next_time(), k.pending()), (8, Some(9), 1));
        // a limit in the past moves nothing
        assert_eq!(drain(&mut k, 2), []);
        assert_eq!(k.now(), 8);
        assert_eq!(drain(&mut k, 9), [(9, 2)]);
        assert_eq!(k.next_time(), None);
    }

    #[test]
    fn a_stop_ends_the_run_where_it_is() {
        let mut k = Kernel::new();
        at(&mut k, 1, 1);
        at(&mut k, 2, 2);
        assert!(k.run_until(10, |_, e| e.label == 1));
        assert_eq!((k.now(), k.pending()), (1, 1));
    }

    #[test]
    fn cancelled_events_are_skipped_and_handed_back() {
        let mut k = Kernel::new();
        let c1 = at(&mut k, 1, 1);
        at(&mut k, 2, 2);
        let c3 = at(&mut k, 3, 3);
        at(&mut k, 3, 4);
        c1.set(true);
        c3.set(true);
        assert_eq!(k.next_time(), Some(2));
        assert_eq!(k.take_discarded().iter().map(|e| e.label).collect::<Vec<_>>(), [1]);
        assert_eq!(drain(&mut k, 10), [(2, 2), (3, 4)]);
        assert_eq!(k.steps(), 2, "a skipped event is no step");
        assert_eq!(k.take_discarded().iter().map(|e| e.label).collect::<Vec<_>>(), [3]);
        // cancelled after being queued behind the front: skipped all the same
        let c = at(&mut k, 20, 5);
        at(&mut k, 20, 6);
        c.set(true);
        assert_eq!(drain(&mut k, 30), [(20, 6)]);
        // a queue of cancelled events only is empty
        let c = at(&mut k, 40, 7);
        c.set(true);
        assert_eq!((k.next_time(), k.pop(None).map(|e| e.label)), (None, None));
    }

    #[test]
    fn quietness_is_inherited_and_reported() {
        let mut k = Kernel::new();
        let (loud, _) = ev(1);
        let (quiet, _) = ev(2);
        k.schedule_at(1, Some(false), loud);
        k.schedule_at(2, Some(true), quiet);
        let mut seen = Vec::new();
        k.run_until(10, |k, e| {
            seen.push((e.label, k.in_quiet(), k.last_quiet()));
            if e.label < 3 {
                // inherits the running event's quietness
                let (child, _) = ev(e.label + 10);
                let s = k.schedule(1, None, child);
                assert_eq!(s.quiet, e.label == 2);
            }
            false
        });
        assert_eq!(seen, [(1, false, false), (2, true, true), (11, false, false), (12, true, true)]);
        assert!(!k.in_quiet(), "quietness ends with the event");
        assert!(k.last_quiet());
        k.run_until(20, |_, _| false);
        assert!(!k.last_quiet(), "a new run forgets it");
        // outside events the default is loud
        let (e, _) = ev(9);
        assert!(!k.schedule(0, None, e).quiet);
    }

    #[test]
    fn sequences_count_every_scheduling() {
        let mut k: Kernel<Ev> = Kernel::default();
        let s1 = k.schedule_at(5, None, ev(1).0);
        let s2 = k.schedule_at(5, None, ev(2).0);
        assert_eq!((s1.sequence, s2.sequence), (1, 2));
        assert_eq!(k.take_pending().len(), 2);
        assert_eq!((k.pending(), k.next_time()), (0, None));
    }

    #[test]
    fn saturates_at_the_end_of_time() {
        let mut k = Kernel::new();
        k.advance_to(i64::MAX - 1);
        let s = k.schedule(10, None, ev(1).0);
        assert_eq!(s.time, i64::MAX);
    }

    #[test]
    fn agrees_with_a_sorted_list_on_random_operations() {
        // the model: every event with its (time, sequence), popped as the least one not
        // cancelled and due by the limit
        let mut rng = crate::sim::Twister::from_int_seed(2024);
        let mut k = Kernel::new();
        let mut model: Vec<(i64, u64, u32, Rc<Cell<bool>>)> = Vec::new();
        let mut sequence = 0;
        for label in 0..5000u32 {
            match rng.below(4) {
                0 | 1 => {
                    let time = k.now() - 5 + rng.below(30) as i64;
                    let (e, cancel) = ev(label);
                    let s = k.schedule_at(time, None, e);
                    sequence += 1;
                    assert_eq!((s.time, s.sequence), (time.max(k.now()), sequence));
                    model.push((s.time, s.sequence, label, cancel));
                }
                2 if !model.is_empty() => {
                    let i = rng.below(model.len() as u64) as usize;
                    model[i].3.set(true);
                }
                _ => {
                    let limit = k.now() + rng.below(10) as i64;
                    let expected = model
                        .iter()
                        .enumerate()
                        .filter(|(_, m)| !m.3.get() && m.0 <= limit)
                        .min_by_key(|(_, m)| (m.0, m.1))
                        .map(|(i, _)| i);
                    let got = k.pop(Some(limit)).map(|e| e.label);
                    match expected {
                        Some(i) => {
                            let (time, _, want, _) = model.remove(i);
                            assert_eq!((got, k.now()), (Some(want), time));
                        }
                        None => assert_eq!(got, None),
                    }
                    k.end_event();
                }
            }
        }
    }
}

