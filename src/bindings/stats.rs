//! `_bootstrap_draws`: the resampling loop of `epochlab.campaigns.aggregate.bootstrap_percentiles`
//! ([`crate::stats::bootstrap_draws`]), drawing from the caller's `random.Random` through the
//! Mersenne Twister of `crate::sim::twister`, exactly as CPython's `randrange` does; the
//! caller's generator is left as it was (its state is copied).

use pyo3::prelude::*;

use super::errors::IntoPyResult;
use super::sim::twister_from_python;

/// Per quantile, the `resamples` pooled percentiles in draw order (the caller sorts them and
/// takes the interval). `runs`: the runs' latencies, none empty; `rng`: a `random.Random`.
#[pyfunction]
pub(crate) fn _bootstrap_draws(runs: Vec<Vec<i64>>, qs: Vec<f64>, resamples: usize, rng: &Bound<'_, PyAny>) -> PyResult<Vec<Vec<f64>>> {
    let mut twister = twister_from_python(rng)?;
    crate::stats::bootstrap_draws(&runs, &qs, resamples, |n| twister.below(n)).py()
}
