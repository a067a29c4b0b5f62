//! The nresilience demo: a frontend → backend → db chain on loopback, each hop an axum app
//! with `NestedRetryLayer` and a retrying `nresilience-client`, driven with a fault window
//! in db.
//!
//! Each hop is a `fn …_app(..) -> Router`, so a test can drive it without sockets.

pub mod chain;
pub mod telemetry;
