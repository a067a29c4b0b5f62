//! Which of the chain's signals a client's classifier honours, and reading them off an
//! answer.

use http::HeaderMap;
use nresilience_wire::{read_overloaded, read_retried};

/// The chain's signals a classifier honours (C1, C6): both by default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ChainSignals {
    pub(crate) overloaded: bool,
    pub(crate) retried: bool,
}

impl ChainSignals {
    /// Both signals honoured.
    pub(crate) const BOTH: Self = Self {
        overloaded: true,
        retried: true,
    };

    /// Whether the answer carries the overload signal and this client honours it.
    pub(crate) fn says_overloaded(self, headers: &HeaderMap) -> bool {
        self.overloaded && read_overloaded(headers)
    }

    /// Whether the answer carries the retried signal and this client honours it.
    pub(crate) fn says_retried(self, headers: &HeaderMap) -> bool {
        self.retried && read_retried(headers).is_some()
    }
}
