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

impl Criticality {
    /// Every criticality, in declaration order (`ALL[c as usize] == c`).
    pub const ALL: [Self; 3] = [Self::Critical, Self::Normal, Self::Sheddable];

    /// Whether `self` is at least as critical as `other`: a critical call is at least as
    /// critical as any, a sheddable one only as another sheddable one.
    #[must_use]
    pub(crate) const fn at_least(self, other: Self) -> bool {
        // Declared from the most critical down.
        self as u8 <= other as u8
    }

    /// The `criticality` member of `x-nresilience-chain`: `critical`, `normal` or `sheddable`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Critical => "critical",
            Self::Normal => "normal",
            Self::Sheddable => "sheddable",
        }
    }

    /// The criticality a `criticality` member of `x-nresilience-chain` names, exactly as
    /// [`as_str`](Self::as_str) writes it; any other value is `None`.
    ///
    /// ```
    /// use nresilience_core::Criticality;
    ///
    /// assert_eq!(Criticality::from_header(b"sheddable"), Some(Criticality::Sheddable));
    /// assert_eq!(Criticality::from_header(b"Sheddable"), None);
    /// ```
    #[must_use]
    pub fn from_header(value: &[u8]) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|criticality| criticality.as_str().as_bytes() == value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn o6_criticality_is_ordered_from_critical_down_to_sheddable() {
        use Criticality::{Critical, Normal, Sheddable};
        assert!(Critical.at_least(Normal) && Normal.at_least(Sheddable));
        assert!(!Sheddable.at_least(Normal) && !Normal.at_least(Critical));
        assert!(Criticality::ALL.into_iter().all(|c| c.at_least(c)));
    }

    #[test]
    fn c3_all_is_in_declaration_order() {
        for (i, criticality) in Criticality::ALL.into_iter().enumerate() {
            assert_eq!(criticality as usize, i);
        }
    }

    #[test]
    fn c3_every_criticality_reads_back_and_nothing_else_does() {
        for criticality in Criticality::ALL {
            assert_eq!(
                Criticality::from_header(criticality.as_str().as_bytes()),
                Some(criticality)
            );
        }
        for value in [&b""[..], b"NORMAL", b" normal", b"normal ", b"low", b"\xff"] {
            assert_eq!(Criticality::from_header(value), None, "{value:?}");
        }
    }
}
