//! The simulator's engine, in pure Rust: the event kernel ([`kernel`]), the network model
//! ([`network`]), CPython's Mersenne Twister that the network draws from ([`twister`]), one
//! broker's replication traffic, the follower's fetcher and the leader's fetch serving
//! ([`fetcher`]), and a leader's produce path ([`produce`]). `src/bindings/sim.rs` wraps
//! the first three as `epochlab._core.Kernel`, `Timer` and `Network`, whose Python twins (`epochlab.sim.kernel`, `epochlab.sim.network`)
//! state the rules; both give the same run, draw for draw. `src/bindings/plane.rs`
//! (`FetchPlane`) drives the fetcher and the produce path, whose Python twins are
//! `epochlab.sim.broker.Broker`'s fetcher, fetch-serving and produce methods.
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
pub mod twister;

pub use kernel::{Kernel, Payload, Scheduled};
pub use network::{Link, Message, Network, NodeId, SendOptions};
pub use twister::Twister;
