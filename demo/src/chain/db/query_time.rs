//! A `tail` fault's query time: log-normal, its median the healthy query time and its 99th
//! percentile ten times that (about p50 10 ms, p99 100 ms at the demo's defaults).

use std::time::Duration;

use rand::Rng;

/// The standard normal's 99th percentile: a log-normal's p99 / p50 is e^(σ × this).
const Z_99: f64 = 2.326_347_874;

/// A query time whose median is `median` and whose 99th percentile is ten times it.
pub(super) fn heavy_tailed(median: Duration, rng: &mut impl Rng) -> Duration {
    let sigma = 10f64.ln() / Z_99;
    median.mul_f64((sigma * standard_normal(rng)).exp())
}

/// A draw of the standard normal distribution (Box–Muller).
fn standard_normal(rng: &mut impl Rng) -> f64 {
    // In (0, 1]: the logarithm of zero is not a number.
    let u = 1.0 - rng.random::<f64>();
    let v = rng.random::<f64>();
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn p3_the_tail_has_its_median_at_the_healthy_time_and_p99_ten_times_it() {
        let mut rng = StdRng::seed_from_u64(7);
        let median = Duration::from_millis(10);
        let mut times: Vec<Duration> = (0..100_000)
            .map(|_| heavy_tailed(median, &mut rng))
            .collect();
        times.sort();
        let (p50, p99) = (times[50_000].as_secs_f64(), times[99_000].as_secs_f64());
        assert!((p50 / 0.010 - 1.0).abs() < 0.03, "p50 {p50}");
        assert!((p99 / 0.100 - 1.0).abs() < 0.05, "p99 {p99}");
    }
}
