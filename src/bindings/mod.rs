//! The only PyO3 code: the `epochlab._core` module. Each file wraps one core module; classes
//! are `frozen` and guard their state with a `Mutex` so that a method call is atomic even when
//! the GIL is released during bulk work or on a free-threaded interpreter.

mod args;
mod arrow;
mod batch;
mod checks;
mod coverage;
mod divergence;
mod epoch_cache;
mod errors;
mod formats;
mod log;
mod messages;
mod plane;
mod producer_state;
mod replay;
mod replica;
mod sim;
mod stats;
mod watch;

use pyo3::prelude::*;

fn build_string() -> String {
    let profile = if cfg!(debug_assertions) { "debug" } else { "release" };
    format!(
        "epochlab {} ({profile}, {}-{})",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::ARCH,
        std::env::consts::OS
    )
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("BUILD", build_string())?;
    m.add_class::<batch::PyRecordBatch>()?;
    m.add_class::<batch::PyLogAppendInfo>()?;
    m.add_class::<epoch_cache::PyLeaderEpochCache>()?;
    m.add_class::<producer_state::PyProducerStateManager>()?;
    m.add_class::<log::PyReplicaLog>()?;
    m.add_class::<replica::PyReplica>()?;
    m.add_class::<watch::PyChangeWatch>()?;
    m.add_class::<watch::PyWatcher>()?;
    m.add_class::<checks::PyStateScan>()?;
    m.add_class::<coverage::PyProtocolCoverage>()?;
    m.add_class::<plane::PyFetchPlane>()?;
    m.add_class::<plane::PlaneHandler>()?;
    m.add_class::<plane::PlaneTimer>()?;
    divergence::register(m)?;
    replay::register(m)?;
    formats::register(m)?;
    sim::register(m)?;
    m.add_function(wrap_pyfunction!(stats::_bootstrap_draws, m)?)?;
    Ok(())
}
