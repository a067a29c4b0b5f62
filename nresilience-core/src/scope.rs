//! Values a task carries while it runs: the nesting context, what the request being served
//! said, and what its calls have learned.
//!
//! Each is a thread-local slot, set around every poll of the future that carries it and
//! restored afterwards, so it follows the task from thread to thread and never leaks into
//! another task. It is what a tokio task-local does, in a `Cell` of a `Copy` value: reading
//! or setting it costs a few instructions on every call's hot path.
//!
//! # Example
//!
//! ```
//! use nresilience_core::nesting::{self, NestingSource};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let inside = nesting::scope(NestingSource::Header, async { nesting::current() }).await;
//! assert_eq!(inside, Some(NestingSource::Header));
//! assert_eq!(nesting::current(), None);
//! # }
//! ```

use std::cell::Cell;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::thread::LocalKey;

use pin_project_lite::pin_project;

/// A value a task can carry through [`Scoped`].
///
/// Sealed: implemented by [`NestingSource`](crate::nesting::NestingSource),
/// [`Inbound`](crate::chain::Inbound) and [`Learned`](crate::chain::Learned).
pub trait Carried: Copy + 'static + sealed::Sealed {}

pub(crate) mod sealed {
    use super::{Cell, LocalKey};

    /// The slot of a [`Carried`](super::Carried) value on each thread.
    pub trait Sealed: Sized {
        fn slot() -> &'static LocalKey<Cell<Option<Self>>>;
    }
}

impl<T: Copy + 'static + sealed::Sealed> Carried for T {}

/// The value the running task carries, if any.
#[inline]
pub(crate) fn current<T: Carried>() -> Option<T> {
    T::slot().get()
}

/// Changes the value the running task carries, if it carries one.
#[inline]
pub(crate) fn update<T: Carried>(f: impl FnOnce(&mut T)) {
    let slot = T::slot();
    if let Some(mut value) = slot.get() {
        f(&mut value);
        slot.set(Some(value));
    }
}

/// Runs `f` carrying `value`; returns what `f` returned and the value as `f` left it.
#[inline]
pub(crate) fn sync_scope<T: Carried, R>(mut value: T, f: impl FnOnce() -> R) -> (R, T) {
    let output = sync_scope_mut(&mut value, f);
    (output, value)
}

/// Runs `f` carrying `*value`, and leaves in `*value` what `f` made of it.
///
/// By reference, so that a poll's output goes straight to the caller instead of through a
/// tuple with the value.
#[inline]
pub(crate) fn sync_scope_mut<T: Carried, R>(value: &mut T, f: impl FnOnce() -> R) -> R {
    /// Puts the outer value back if `f` panics.
    struct Restore<T: Carried>(Option<T>);

    impl<T: Carried> Drop for Restore<T> {
        fn drop(&mut self) {
            T::slot().set(self.0);
        }
    }

    let restore = Restore(T::slot().replace(Some(*value)));
    let output = f();
    let outer = restore.0;
    // `f` returned: one swap puts the outer value back and hands over the inner one, so the
    // guard, there for a panic in `f`, must not restore a second time.
    #[allow(clippy::mem_forget)]
    std::mem::forget(restore);
    if let Some(inside) = T::slot().replace(outer) {
        *value = inside;
    }
    output
}

pin_project! {
    /// A future that carries a value while it is polled: made by
    /// [`nesting::scope`](crate::nesting::scope), [`chain::serving`](crate::chain::serving)
    /// and [`chain::learning`](crate::chain::learning).
    #[must_use = "futures do nothing unless polled"]
    pub struct Scoped<T, F> {
        value: T,
        #[pin]
        future: F,
    }
}

impl<T, F> Scoped<T, F> {
    pub(crate) fn new(value: T, future: F) -> Self {
        Self { value, future }
    }

    /// The value carried, as the future has left it so far.
    pub fn value(&self) -> &T {
        &self.value
    }
}

impl<T: Carried, F: Future> Future for Scoped<T, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let future = this.future;
        sync_scope_mut(this.value, || future.poll(cx))
    }
}

impl<T: fmt::Debug, F> fmt::Debug for Scoped<T, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scoped")
            .field("value", &self.value)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use crate::nesting::{self, NestingSource};

    #[test]
    fn n3_a_panic_inside_restores_the_outer_value() {
        let caught = std::panic::catch_unwind(|| {
            nesting::sync_scope(NestingSource::Header, || panic!("inside"))
        });
        assert!(caught.is_err());
        assert_eq!(nesting::current(), None);
    }

    #[tokio::test]
    async fn n3_the_value_is_carried_only_while_polled() {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let waiting = tokio::spawn(nesting::scope(NestingSource::InProcess, async move {
            let before = nesting::current();
            rx.await.ok();
            (before, nesting::current())
        }));
        tokio::task::yield_now().await;
        // The other task is parked inside its scope: this one sees nothing of it.
        assert_eq!(nesting::current(), None);
        tx.send(()).ok();
        let (before, after) = waiting.await.unwrap();
        assert_eq!(before, Some(NestingSource::InProcess));
        assert_eq!(after, Some(NestingSource::InProcess));
    }
}
