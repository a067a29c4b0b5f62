//! The layer end to end: through axum, tonic and plain hyper, with `oneshot` and over real
//! sockets on 127.0.0.1.

mod admission;
mod axum_router;
mod call_failed_response;
mod chain_headers;
mod fleet;
mod hyper_service;
mod reqwest_call_failed;
mod support;
mod tonic_server;
