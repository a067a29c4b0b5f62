use super::rng::SplitMix64;
use super::InvalidSimulation;

/// The traffic a simulation offers: open loop, so a slow dependency does not slow arrivals.
///
/// # Example
///
/// ```
/// use simulator::Load;
///
/// let load = Load::constant(500.0).peers(50);
/// assert_eq!(load.per_second, 500.0);
/// assert_eq!(load.peers, 50);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct Load {
    /// The mean rate, calls per second.
    pub per_second: f64,
    /// How many processes, this one included, offer the same load to the same dependency.
    pub peers: u32,
}

impl Load {
    /// `per_second` calls a second on average. The gaps between arrivals are uniform in
    /// `[0, 2 / per_second)`, so a second holds the short bursts real traffic holds, in places
    /// the seed fixes.
    #[must_use]
    pub const fn constant(per_second: f64) -> Self {
        Self {
            per_second,
            peers: 1,
        }
    }

    /// How many processes, this one included, offer the same load to the same dependency.
    /// The peers only count against [`Dependency::capacity`](super::Dependency::capacity):
    /// their own retries and budgets are not simulated. Defaults to `1`.
    #[must_use]
    pub const fn peers(mut self, peers: u32) -> Self {
        self.peers = peers;
        self
    }

    /// The mean rate, calls per second.
    #[must_use]
    pub const fn per_second(&self) -> f64 {
        self.per_second
    }

    pub(super) fn validate(&self) -> Result<(), InvalidSimulation> {
        if !(self.per_second.is_finite() && self.per_second > 0.0) {
            return Err(InvalidSimulation::new(format!(
                "load must be a positive number of calls per second, got {}",
                self.per_second
            )));
        }
        if self.peers == 0 {
            return Err(InvalidSimulation::new(
                "load peers must be at least 1 (this process is one of them)".to_owned(),
            ));
        }
        Ok(())
    }

    /// Nanoseconds to the next arrival.
    pub(super) fn gap(&self, rng: &mut SplitMix64) -> u64 {
        (2.0 * rng.next_f64() * 1e9 / self.per_second) as u64
    }
}
