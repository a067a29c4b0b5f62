/// How much a caller is waiting on a call, which decides when its retries are refused.
///
/// Criticality changes *when* the budget refuses a retry, never *what* a refusal is:
/// a refused retry always ends the call as budget-exhausted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Criticality {
    /// Work someone is waiting on that must not be shed; spends the bucket like `Normal`.
    Critical,
    /// Ordinary traffic: a retry is granted while one whole token is in the bucket.
    #[default]
    Normal,
    /// Work nobody is waiting on (a backfill, a prefetch): a retry is granted only while
    /// it leaves at least half of the bucket behind.
    Sheddable,
}
