//! Campaign statistics: the bootstrap over runs of pooled latency percentiles behind
//! `epochlab.campaigns.aggregate.bootstrap_percentiles` (`epochlab._core._bootstrap_draws`
//! wraps [`bootstrap_draws`]); its plain Python statement, `bootstrap_draws_plain`, is the
//! oracle that gives the same draws and the same numbers.
//!
//! A resample draws `len(runs)` run indices (`randrange(len(runs))` of the caller's
//! `random.Random`: the caller passes the draw), pools the picked runs' latencies and takes
//! each percentile by linear interpolation between the closest ranks (Spark's `percentile`).
//! Rather than pooling and sorting again for every resample, every latency is sorted once
//! with the run it came from; a resample counts how often each run was picked and finds a rank
//! by walking that sorted list with those counts as weights.

use crate::error::ArgumentError;

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

/// Per quantile of `qs`, the `resamples` pooled percentiles in draw order (the caller sorts
/// them and takes the interval). `runs`: each run's latencies, none empty; `below(n)`: the
/// next run index, uniform in `[0, n)` (the caller's generator, asked `len(runs)` times per
/// resample, in order).
pub fn bootstrap_draws(runs: &[Vec<i64>], qs: &[f64], resamples: usize, mut below: impl FnMut(u64) -> u64)
                       -> Result<Vec<Vec<f64>>, ArgumentError> {
    if runs.is_empty() {
        let reason = "no runs to resample".to_string();
        return Err(ArgumentError::InvalidText { argument: "runs", value: "[]".into(), reason });
    }
    if let Some(i) = runs.iter().position(Vec::is_empty) {
        let reason = "a run without latencies (leave it out)".to_string();
        return Err(ArgumentError::InvalidText { argument: "runs", value: format!("run {i}: []"), reason });
    }
    if let Some(q) = qs.iter().find(|q| !(0.0..=1.0).contains(*q)) {
        let reason = "a quantile is in [0, 1]".to_string();
        return Err(ArgumentError::InvalidText { argument: "qs", value: q.to_string(), reason });
    }
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
            let pick = below(n).min(n - 1) as usize;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The plain statement: pool the picked runs, sort, interpolate between the closest ranks.
    fn pooled_percentile(runs: &[Vec<i64>], picks: &[usize], q: f64) -> f64 {
        let mut pooled: Vec<i64> = picks.iter().flat_map(|&p| runs[p].iter().copied()).collect();
        pooled.sort_unstable();
        let pos = q * (pooled.len() - 1) as f64;
        let lo = pos as usize;
        let hi = (lo + 1).min(pooled.len() - 1);
        pooled[lo] as f64 + (pooled[hi] - pooled[lo]) as f64 * (pos - lo as f64)
    }

    #[test]
    fn every_resample_is_the_pooled_percentile_of_its_picks() {
        let runs = vec![vec![5, 1, 9], vec![3], vec![7, 7, 2, 40], vec![-4, 11]];
        let qs = [0.0, 0.5, 0.9, 0.99, 1.0];
        // a fixed stream of picks (a small LCG), kept to replay each resample by hand
        let mut state = 7u64;
        let mut drawn = Vec::new();
        let out = bootstrap_draws(&runs, &qs, 50, |n| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let pick = (state >> 33) % n;
            drawn.push(pick as usize);
            pick
        }).expect("valid input");
        assert_eq!(drawn.len(), 50 * runs.len(), "len(runs) draws per resample");
        for (k, picks) in drawn.chunks(runs.len()).enumerate() {
            for (i, &q) in qs.iter().enumerate() {
                let want = pooled_percentile(&runs, picks, q);
                assert!((out[i][k] - want).abs() < 1e-9, "resample {k}, q {q}: {} != {want}", out[i][k]);
            }
        }
    }

    #[test]
    fn one_run_gives_its_own_percentiles() {
        let runs = vec![vec![10, 20, 30, 40]];
        let out = bootstrap_draws(&runs, &[0.5], 3, |_| 0).expect("valid input");
        assert_eq!(out, vec![vec![25.0, 25.0, 25.0]]);
    }

    #[test]
    fn bad_input_is_a_typed_error_naming_the_argument() {
        let named = |r: Result<Vec<Vec<f64>>, ArgumentError>| match r {
            Err(ArgumentError::InvalidText { argument, .. }) => argument,
            other => panic!("expected InvalidText, got {other:?}"),
        };
        assert_eq!(named(bootstrap_draws(&[], &[0.5], 1, |_| 0)), "runs");
        assert_eq!(named(bootstrap_draws(&[vec![1], vec![]], &[0.5], 1, |_| 0)), "runs");
        assert_eq!(named(bootstrap_draws(&[vec![1]], &[1.5], 1, |_| 0)), "qs");
        assert_eq!(named(bootstrap_draws(&[vec![1]], &[f64::NAN], 1, |_| 0)), "qs");
    }
}
