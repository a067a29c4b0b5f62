//! The one timer a driver of a [`Call`](crate::call::Call) needs.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use pin_project_lite::pin_project;
use tokio::time::Sleep;

pin_project! {
    /// One timer for a call's running attempt's cut ([`Attempt::cut_at`](crate::call::Attempt::cut_at)),
    /// its backoff and its rejection pause: never two at once.
    ///
    /// The tokio timer is made only when first polled with somewhere to go, so an attempt
    /// answered on its first poll never touches the timer wheel, and then it is reused.
    ///
    /// ```
    /// use std::pin::pin;
    /// use std::time::Duration;
    /// use nresilience_core::call::Timer;
    /// use nresilience_core::clock;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let mut timer = pin!(Timer::new());
    /// let start = clock::now();
    /// timer.as_mut().set(Some(start + Duration::from_millis(100)));
    /// std::future::poll_fn(|cx| timer.as_mut().poll(cx)).await;
    /// assert_eq!(clock::now() - start, Duration::from_millis(100));
    /// # }
    /// ```
    #[derive(Debug, Default)]
    pub struct Timer {
        #[pin]
        sleep: Option<Sleep>,
        wake_at: Option<Instant>,
    }
}

impl Timer {
    /// A timer set to nothing.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets when the timer is due; `None` is never.
    pub fn set(self: Pin<&mut Self>, wake_at: Option<Instant>) {
        *self.project().wake_at = wake_at;
    }

    /// Ready once the instant last set has come; pending for ever when set to nothing.
    pub fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut this = self.project();
        let Some(wake_at) = this.wake_at.map(tokio::time::Instant::from_std) else {
            return Poll::Pending;
        };
        match this.sleep.as_mut().as_pin_mut() {
            Some(sleep) if sleep.deadline() == wake_at => {}
            Some(sleep) => sleep.reset(wake_at),
            None => this.sleep.set(Some(tokio::time::sleep_until(wake_at))),
        }
        match this.sleep.as_pin_mut() {
            Some(sleep) => sleep.poll(cx),
            None => Poll::Pending,
        }
    }
}
