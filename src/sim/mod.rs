//! The simulator's engine, in pure Rust: the event kernel ([`kernel`]), the network model
//! ([`network`]) and CPython's Mersenne Twister that the network draws from ([`twister`]).
//! `src/bindings/sim.rs` wraps them as `epochlab._core.Kernel`, `Timer` and `Network`, whose
//! Python twins (`epochlab.sim.kernel`, `epochlab.sim.network`) state the rules; both give the
//! same run, draw for draw.
//!
//! The kernel and the network are generic over what an event and a message carry, and never
//! drop what they carry on their own: what they let go of is handed back
//! ([`kernel::Kernel::take_discarded`], [`network::Network::take_discarded`]) for the owner to
//! drop when it chooses (the bindings: with no lock held, since dropping a Python object may
//! run Python code).

pub mod kernel;
pub mod fetcher;
pub mod network;
pub mod twister;

pub use kernel::{Kernel, Payload, Scheduled};
pub use network::{Link, Message, Network, NodeId, SendOptions};
pub use twister::Twister;
