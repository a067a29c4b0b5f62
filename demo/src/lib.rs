//! The nresilience demo: a frontend → backend → db chain on loopback, driven with a fault
//! window in db. The frontend and backend are axum apps built on nresilience
//! (`NestedRetryLayer` and a retrying `nresilience-client`) or, for comparison, on a retry
//! library a Rust user picks instead.
//!
//! Each hop is a `fn …_app(..) -> Router`, so a test can drive it without sockets.

pub mod chain;
pub mod fleet;
mod format;
pub mod matrix;
pub mod telemetry;
