//! Which of the chain's signals a client's classifier honours, and reading them off an
//! answer.

use http::HeaderMap;
use nresilience_core::chain::{overloaded, retried, single, OVERLOADED_HEADER, RETRIED_HEADER};

/// The chain's signals a classifier honours (C1, C6): both by default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ChainSignals {
    pub(crate) overloaded: bool,
    pub(crate) retried: bool,
}

impl ChainSignals {
    /// Both signals honoured.
    pub(crate) const BOTH: ChainSignals = ChainSignals {
        overloaded: true,
        retried: true,
    };

    /// Whether the answer carries the overload signal and this client honours it.
    pub(crate) fn says_overloaded(&self, headers: &HeaderMap) -> bool {
        self.overloaded && one_value(headers, OVERLOADED_HEADER).is_some_and(overloaded)
    }

    /// Whether the answer carries the retried signal and this client honours it.
    pub(crate) fn says_retried(&self, headers: &HeaderMap) -> bool {
        self.retried
            && one_value(headers, RETRIED_HEADER)
                .and_then(retried)
                .is_some()
    }
}

/// A header's value when it is sent exactly once: a repeated signal is no signal.
fn one_value<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a [u8]> {
    single(headers.get_all(name).iter().map(|value| value.as_bytes()))
}
