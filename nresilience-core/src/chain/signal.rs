//! Which endings of a call its hop tells its caller about (C1, C6): the one rule a server
//! layer, a handler's error answer and a gRPC status all follow.

use crate::outcome::StopReason;

/// What a hop whose call to its own dependency failed tells its caller, so that no layer
/// above piles retries onto one that has refused or retried already.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Signal {
    /// The call was refused for overload — by its retry budget, a circuit breaker or overload
    /// control — or its dependency answered overloaded: callers do not retry the answer (C1).
    Overloaded,
    /// The call failed after retrying, or its dependency answered that it had retried:
    /// callers do not retry the answer either (C6).
    Retried {
        /// The attempts made, at least one.
        attempts: u32,
    },
}

impl StopReason {
    /// Whether a call that stopped so was refused for overload, here or below.
    #[inline]
    #[must_use]
    pub const fn is_overload(self) -> bool {
        matches!(
            self,
            Self::BudgetExhausted | Self::BreakerOpen | Self::Saturated | Self::Overloaded
        )
    }

    /// The signal a hop whose call stopped so, after `attempts` attempts, sends its caller;
    /// `None` for an ending the caller may retry as any other failure (a permanent failure,
    /// a deadline, a single attempt that failed).
    ///
    /// ```
    /// use nresilience_core::chain::Signal;
    /// use nresilience_core::StopReason;
    ///
    /// assert_eq!(StopReason::BudgetExhausted.signal(1), Some(Signal::Overloaded));
    /// assert_eq!(StopReason::AttemptsExhausted.signal(3), Some(Signal::Retried { attempts: 3 }));
    /// assert_eq!(StopReason::AttemptsExhausted.signal(1), None);
    /// assert_eq!(StopReason::DeadlineExceeded.signal(3), None);
    /// ```
    #[inline]
    #[must_use]
    pub const fn signal(self, attempts: u32) -> Option<Signal> {
        if self.is_overload() {
            return Some(Signal::Overloaded);
        }
        match self {
            Self::AttemptsExhausted if attempts > 1 => Some(Signal::Retried { attempts }),
            Self::RetriedBelow => Some(Signal::Retried {
                attempts: if attempts > 1 { attempts } else { 1 },
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c1_c6_each_ending_sends_the_signal_its_rule_says() {
        for reason in [
            StopReason::BudgetExhausted,
            StopReason::BreakerOpen,
            StopReason::Saturated,
            StopReason::Overloaded,
        ] {
            assert!(reason.is_overload(), "{reason}");
            assert_eq!(reason.signal(1), Some(Signal::Overloaded), "{reason}");
            assert_eq!(reason.signal(4), Some(Signal::Overloaded), "{reason}");
        }
        assert_eq!(
            StopReason::AttemptsExhausted.signal(4),
            Some(Signal::Retried { attempts: 4 })
        );
        assert_eq!(StopReason::AttemptsExhausted.signal(1), None);
        assert_eq!(
            StopReason::RetriedBelow.signal(0),
            Some(Signal::Retried { attempts: 1 })
        );
        for reason in [
            StopReason::Succeeded,
            StopReason::Permanent,
            StopReason::DeadlineExceeded,
        ] {
            assert!(!reason.is_overload(), "{reason}");
            assert_eq!(reason.signal(4), None, "{reason}");
        }
    }
}
