//! The simulator's engine, in pure Rust: the event kernel ([`kernel`]), the network model
//! ([`network`]), CPython's Mersenne Twister that the network draws from ([`twister`]), one
//! broker's replication traffic, the follower's fetcher and the leader's fetch serving
//! ([`fetcher`]), a leader's produce path ([`produce`]) and a broker's consumer fetch
//! serving ([`reads`]). `src/bindings/sim.rs` wraps
//! the first three as `epochlab._core.Kernel`, `Timer` and `Network`, whose Python twins (`epochlab.sim.kernel`, `epochlab.sim.network`)
//! state the rules; both give the same run, draw for draw. `src/bindings/plane.rs`
//! (`FetchPlane`) drives the fetcher, the produce path and the consumer reads, whose Python
//! twins are `epochlab.sim.broker.Broker`'s fetcher, fetch-serving, produce and
//! consumer-read methods.
//!
//! The kernel and the network are generic over what an event and a message carry, and never
//! drop what they carry on their own: what they let go of is handed back
//! ([`kernel::Kernel::take_discarded`], [`network::Network::take_discarded`]) for the owner to
//! drop when it chooses (the bindings: with no lock held, since dropping a Python object may
//! run Python code).

pub mod kernel;
pub mod fetcher;
pub mod network;
pub mod produce;
pub mod reads;
pub mod twister;

pub use kernel::{Kernel, Payload, Scheduled};
pub use network::{Link, Message, Network, NodeId, SendOptions};
pub use twister::Twister;

/// Give the purgatory entry whose token is `token` its timer; `Some(timer)` back when no
/// entry has that token (the caller drops it). `slots`: each entry's token and timer slot.
pub(crate) fn arm<'a, T: 'a>(slots: impl Iterator<Item = (u64, &'a mut Option<T>)>, token: u64, timer: T) -> Option<T> {
    for (t, slot) in slots {
        if t == token {
            *slot = Some(timer);
            return None;
        }
    }
    Some(timer)
}
