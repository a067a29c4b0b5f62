//! gRPC's own retry metrics, as gRFC A96 names them, beside nresilience's: recorded once per
//! call, at its end, with the attributes gRFC A66 defines.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::Uri;
use opentelemetry::metrics::Histogram;
use opentelemetry::{global, KeyValue, StringValue};

/// `grpc.client.call.retries`: the retries of a call, hedges not counted; a call without
/// one records nothing.
pub const CALL_RETRIES: &str = "grpc.client.call.retries";
/// `grpc.client.call.hedges`: the hedges of a call; a call without one records nothing.
pub const CALL_HEDGES: &str = "grpc.client.call.hedges";
/// `grpc.client.call.retry_delay`: the seconds a call spent with no attempt in flight,
/// recorded for every call.
pub const CALL_RETRY_DELAY: &str = "grpc.client.call.retry_delay";
/// The attribute of the full method name, `package.Service/Method`.
pub const METHOD: &str = "grpc.method";
/// The attribute of the target: the one the layer was given
/// ([`GrpcRetryLayer::target`](super::GrpcRetryLayer::target)), else the request's
/// `scheme://authority`, else `other`.
pub const TARGET: &str = "grpc.target";

/// gRFC A96's boundaries for counts of retries and hedges.
const COUNTS: [f64; 5] = [1.0, 2.0, 3.0, 4.0, 5.0];
/// gRFC A66's latency boundaries, in seconds.
const LATENCY: [f64; 41] = [
    0.0, 0.00001, 0.00005, 0.0001, 0.0003, 0.0006, 0.0008, 0.001, 0.002, 0.003, 0.004, 0.005,
    0.006, 0.008, 0.01, 0.013, 0.016, 0.02, 0.025, 0.03, 0.04, 0.05, 0.065, 0.08, 0.1, 0.13, 0.16,
    0.2, 0.25, 0.3, 0.4, 0.5, 0.65, 0.8, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0,
];

/// The three histograms, built once per layer from the global meter provider, and the
/// target the layer was given.
#[derive(Clone)]
pub(super) struct CallMetrics {
    retries: Histogram<u64>,
    hedges: Histogram<u64>,
    retry_delay: Histogram<f64>,
    target: Option<StringValue>,
}

impl CallMetrics {
    pub(super) fn new() -> Self {
        let meter = global::meter("nresilience");
        Self {
            target: None,
            retries: meter
                .u64_histogram(CALL_RETRIES)
                .with_unit("{retry}")
                .with_description("Number of retries during the client call.")
                .with_boundaries(COUNTS.to_vec())
                .build(),
            hedges: meter
                .u64_histogram(CALL_HEDGES)
                .with_unit("{hedge}")
                .with_description("Number of hedges during the client call.")
                .with_boundaries(COUNTS.to_vec())
                .build(),
            retry_delay: meter
                .f64_histogram(CALL_RETRY_DELAY)
                .with_unit("s")
                .with_description(
                    "Total time of delay while there is no active attempt during the client call.",
                )
                .with_boundaries(LATENCY.to_vec())
                .build(),
        }
    }

    /// The same histograms, attributed to `target` whatever a request's URI says.
    pub(super) fn with_target(mut self, target: &str) -> Self {
        self.target = Some(Arc::<str>::from(target).into());
        self
    }

    /// What a call of `uri` is attributed to.
    pub(super) fn target_of(&self, uri: &Uri) -> CallTarget {
        CallTarget::of(uri, self.target.as_ref())
    }

    /// Records a call to `target` that ended after `attempts` attempts, `hedges` of them
    /// hedges, having `waited` with none in flight.
    pub(super) fn record(&self, target: &CallTarget, attempts: u32, hedges: u32, waited: Duration) {
        let attributes = [
            KeyValue::new(METHOD, target.method.clone()),
            KeyValue::new(TARGET, target.target.clone()),
        ];
        let retries = attempts.saturating_sub(1).saturating_sub(hedges);
        if retries > 0 {
            self.retries.record(u64::from(retries), &attributes);
        }
        if hedges > 0 {
            self.hedges.record(u64::from(hedges), &attributes);
        }
        self.retry_delay.record(waited.as_secs_f64(), &attributes);
    }
}

impl fmt::Debug for CallMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallMetrics").finish_non_exhaustive()
    }
}

/// What a call's metrics are attributed to, read from its request.
#[derive(Debug)]
pub(super) struct CallTarget {
    method: StringValue,
    target: StringValue,
}

impl CallTarget {
    /// The method of `uri`'s path without its leading `/`, and `configured`, else `uri`'s
    /// `scheme://authority`, else `other`: a layer in front of a tonic `Channel` sees the path
    /// alone, the channel adds its origin behind it.
    fn of(uri: &Uri, configured: Option<&StringValue>) -> Self {
        let method = uri.path().strip_prefix('/').unwrap_or(uri.path());
        let target = match (configured, uri.scheme_str(), uri.authority()) {
            (Some(target), _, _) => target.clone(),
            (None, Some(scheme), Some(authority)) => format!("{scheme}://{authority}").into(),
            (None, None, Some(authority)) => authority.to_string().into(),
            (None, _, None) => "other".into(),
        };
        Self {
            method: method.to_owned().into(),
            target,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a96_the_method_drops_its_slash_and_the_target_is_the_given_one_or_the_uri_s() {
        let uri: Uri = "http://127.0.0.1:50051/helloworld.Greeter/SayHello"
            .parse()
            .unwrap();
        let target = CallTarget::of(&uri, None);
        assert_eq!(target.method.as_str(), "helloworld.Greeter/SayHello");
        assert_eq!(target.target.as_str(), "http://127.0.0.1:50051");
        let path: Uri = "/pkg.S/M".parse().unwrap();
        let bare = CallTarget::of(&path, None);
        assert_eq!(bare.method.as_str(), "pkg.S/M");
        assert_eq!(bare.target.as_str(), "other");
        let given = StringValue::from("dns:///inventory:50051");
        assert_eq!(CallTarget::of(&path, Some(&given)).target, given);
        assert_eq!(CallTarget::of(&uri, Some(&given)).target, given);
    }
}
