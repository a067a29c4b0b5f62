//! The nested-retry context: whether the current work runs inside a call that may retry.
//!
//! Retries multiply across layers, and no layer sees the product. This task-local is how a
//! layer finds out: the executor sets it for the whole of a call that may retry, and the
//! server layer of `nresilience-axum` sets it for a request that arrived with the
//! `x-nresilience-retrying` marker. A retrying call that starts while it is set is nested
//! and is reported, never changed.
//!
//! Scopes nest: leaving an inner scope restores the outer value rather than clearing it.
//! Task-locals do not cross `tokio::spawn`; read [`current`] before spawning and wrap the
//! spawned future in [`scope()`] to carry the context over.
//!
//! # Example
//!
//! ```
//! use nresilience_core::nesting::{self, NestingSource};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! assert_eq!(nesting::current(), None);
//! nesting::scope(NestingSource::Header, async {
//!     assert_eq!(nesting::current(), Some(NestingSource::Header));
//!     nesting::scope(NestingSource::InProcess, async {
//!         assert_eq!(nesting::current(), Some(NestingSource::InProcess));
//!     })
//!     .await;
//!     // Restored, not cleared.
//!     assert_eq!(nesting::current(), Some(NestingSource::Header));
//! })
//! .await;
//! # }
//! ```

use std::fmt;
use std::future::Future;

use std::cell::Cell;
use std::thread::LocalKey;

use crate::scope::{self, sealed, Scoped};

/// Where the retrying context came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NestingSource {
    /// The request being served arrived with the marker: its sender may retry it.
    Header,
    /// A call in this process that may retry is running around the current work.
    InProcess,
}

impl NestingSource {
    /// The attribute value used on spans and metrics: `header` or `in_process`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Header => "header",
            Self::InProcess => "in_process",
        }
    }
}

impl fmt::Display for NestingSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

thread_local! {
    static NESTING: Cell<Option<NestingSource>> = const { Cell::new(None) };
}

impl sealed::Sealed for NestingSource {
    fn slot() -> &'static LocalKey<Cell<Option<Self>>> {
        &NESTING
    }
}

/// The retrying context the current task runs in, if any.
///
/// One thread-local read. Outside any scope it is `None`.
#[inline]
#[must_use]
pub fn current() -> Option<NestingSource> {
    scope::current()
}

/// Runs `future` inside the retrying context `source`, restoring the outer one afterwards.
///
/// The returned future is nameable, so a middleware can hold it in its response future
/// without boxing.
pub fn scope<F: Future>(source: NestingSource, future: F) -> Scoped<NestingSource, F> {
    Scoped::new(source, future)
}

/// Runs the synchronous `f` inside the retrying context `source`.
///
/// For the synchronous half of a middleware: a `Service::call` that starts an outbound call
/// before returning its future.
#[inline]
pub fn sync_scope<R>(source: NestingSource, f: impl FnOnce() -> R) -> R {
    scope::sync_scope(source, f).0
}

/// Runs `f` — one poll of a call's driver — inside the in-process retrying context when the
/// call may `retry`: a retrying call made while it runs is nested (N5). A call that makes one
/// attempt sets nothing.
#[inline(always)]
pub fn retrying_scope<R>(retry: bool, f: impl FnOnce() -> R) -> R {
    if retry {
        sync_scope(NestingSource::InProcess, f)
    } else {
        f()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn n3_unset_outside_any_scope() {
        assert_eq!(current(), None);
    }

    #[tokio::test]
    async fn n3_scope_sets_and_restores_the_outer_value() {
        scope(NestingSource::Header, async {
            assert_eq!(current(), Some(NestingSource::Header));
            scope(NestingSource::InProcess, async {
                assert_eq!(current(), Some(NestingSource::InProcess));
            })
            .await;
            assert_eq!(current(), Some(NestingSource::Header));
        })
        .await;
        assert_eq!(current(), None);
    }

    #[test]
    fn n3_sync_scope_covers_the_closure_only() {
        let inside = sync_scope(NestingSource::Header, current);
        assert_eq!(inside, Some(NestingSource::Header));
        assert_eq!(current(), None);
    }

    #[tokio::test]
    async fn n3_context_does_not_cross_spawn_unless_carried() {
        scope(NestingSource::Header, async {
            let lost = tokio::spawn(async { current() }).await.unwrap();
            assert_eq!(lost, None);
            let source = current().unwrap();
            let carried = tokio::spawn(scope(source, async { current() }))
                .await
                .unwrap();
            assert_eq!(carried, Some(NestingSource::Header));
        })
        .await;
    }

    #[test]
    fn source_names_match_span_attributes() {
        assert_eq!(NestingSource::Header.to_string(), "header");
        assert_eq!(NestingSource::InProcess.as_str(), "in_process");
    }
}
