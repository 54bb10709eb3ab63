//! `_bootstrap_draws`: the resampling loop of `epochlab.campaigns.aggregate.bootstrap_percentiles`
//! (a bootstrap over runs of pooled latency percentiles), the same draws and the same numbers
//! as its plain Python statement, `bootstrap_draws_plain`, without pooling and sorting the
//! latencies again for every resample.
//!
//! A resample draws `len(runs)` run indices with `randrange(len(runs))` from the caller's
//! `random.Random` (the Mersenne Twister of `crate::sim::twister`, drawing exactly as CPython does), pools
//! the picked runs' latencies and takes each percentile by linear interpolation between the
//! closest ranks (Spark's `percentile`). Here every latency is sorted once with the run it
//! came from; a resample counts how often each run was picked and finds a rank by walking
//! that sorted list with those counts as weights.

use pyo3::prelude::*;

use super::sim::twister_from_python;
use crate::error::ArgumentError;
use super::errors::IntoPyResult;

/// The value of rank `rank` (0-based) of the pooled multiset: `values` sorted, each weighted
/// by `counts[run]`.
fn at_rank(values: &[(i64, usize)], counts: &[u64], rank: u64) -> i64 {
    let mut seen = 0u64;
    for &(v, run) in values {
        seen += counts[run];
        if seen > rank {
            return v;
        }
    }
    values.last().map_or(0, |x| x.0)
}

/// Per quantile, the `resamples` pooled percentiles in draw order (the caller sorts them and
/// takes the interval). `runs`: the runs' latencies, none empty; `rng`: a `random.Random`,
/// left as it was (its state is copied).
#[pyfunction]
pub(crate) fn _bootstrap_draws(runs: Vec<Vec<i64>>, qs: Vec<f64>, resamples: usize, rng: &Bound<'_, PyAny>) -> PyResult<Vec<Vec<f64>>> {
    if runs.is_empty() {
        let reason = "no runs to resample".to_string();
        return Err(ArgumentError::InvalidText { argument: "runs", value: "[]".into(), reason }).py();
    }
    if let Some(i) = runs.iter().position(Vec::is_empty) {
        let reason = "a run without latencies (leave it out)".to_string();
        return Err(ArgumentError::InvalidText { argument: "runs", value: format!("run {i}: []"), reason }).py();
    }
    if let Some(q) = qs.iter().find(|q| !(0.0..=1.0).contains(*q)) {
        let reason = "a quantile is in [0, 1]".to_string();
        return Err(ArgumentError::InvalidText { argument: "qs", value: q.to_string(), reason }).py();
    }
    let mut twister = twister_from_python(rng)?;
    let mut values: Vec<(i64, usize)> = runs.iter().enumerate().flat_map(|(i, r)| r.iter().map(move |v| (*v, i))).collect();
    values.sort_unstable();
    let lengths: Vec<u64> = runs.iter().map(|r| r.len() as u64).collect();
    let n = runs.len() as u64;
    let mut out = vec![Vec::new(); qs.len()]; // (grown as drawn: `resamples` is the caller's number)
    let mut counts = vec![0u64; runs.len()];
    for _ in 0..resamples {
        counts.iter_mut().for_each(|c| *c = 0);
        let mut total = 0u64;
        for _ in 0..n {
            let pick = twister.below(n) as usize;
            counts[pick] += 1;
            total += lengths[pick];
        }
        for (i, q) in qs.iter().enumerate() {
            // `_percentile`: pos = q * (len - 1); lo = int(pos); hi = min(lo + 1, len - 1)
            let pos = q * (total - 1) as f64;
            let lo = pos as u64;
            let hi = (lo + 1).min(total - 1);
            let (a, b) = (at_rank(&values, &counts, lo), at_rank(&values, &counts, hi));
            let diff = (i128::from(b) - i128::from(a)) as f64;
            out[i].push(a as f64 + diff * (pos - lo as f64));
        }
    }
    Ok(out)
}
