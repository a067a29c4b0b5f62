//! The request body the retry layer hands to the service it wraps.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::combinators::UnsyncBoxBody;

/// The error of a streamed request body.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A request body that is either buffered — and so can be sent again on a retry — or a
/// stream that is sent once.
#[derive(Debug)]
pub struct RetryBody {
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    Buffered(Option<Bytes>),
    Streamed(UnsyncBoxBody<Bytes, BoxError>),
}

impl RetryBody {
    /// A buffered body; every clone of its bytes is a replay.
    pub fn buffered(bytes: Bytes) -> Self {
        Self {
            kind: Kind::Buffered((!bytes.is_empty()).then_some(bytes)),
        }
    }

    /// A body sent once, as it streams.
    pub fn streamed<B>(body: B) -> Self
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        use http_body_util::BodyExt;
        Self {
            kind: Kind::Streamed(body.map_err(Into::into).boxed_unsync()),
        }
    }

    /// An empty body.
    #[must_use]
    pub fn empty() -> Self {
        Self::buffered(Bytes::new())
    }
}

impl Default for RetryBody {
    fn default() -> Self {
        Self::empty()
    }
}

impl Body for RetryBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match &mut self.get_mut().kind {
            Kind::Buffered(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Kind::Streamed(body) => Pin::new(body).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Buffered(bytes) => bytes.is_none(),
            Kind::Streamed(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Buffered(bytes) => {
                SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64))
            }
            Kind::Streamed(body) => body.size_hint(),
        }
    }
}

/// An error from the wrapped service or the request body, as the retry layer reports it.
#[derive(Debug)]
pub struct TransportError(BoxError);

impl TransportError {
    /// Wraps the error of a service or a body.
    pub fn new(error: impl Into<BoxError>) -> Self {
        Self(error.into())
    }

    /// The error as the service or body returned it.
    #[must_use]
    pub fn get_ref(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.0
    }

    /// The error as the service or body returned it, by value.
    #[must_use]
    pub fn into_inner(self) -> BoxError {
        self.0
    }
}

impl std::fmt::Display for TransportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for TransportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.0)
    }
}

/// A body whose first frames were already read: they are sent first, then the rest.
pub(crate) struct Prefixed<B> {
    prefix: VecDeque<Frame<Bytes>>,
    rest: B,
}

impl<B> Prefixed<B> {
    pub(crate) fn new(prefix: Vec<Frame<Bytes>>, rest: B) -> Self {
        Self {
            prefix: prefix.into(),
            rest,
        }
    }
}

impl<B> Body for Prefixed<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.get_mut();
        match this.prefix.pop_front() {
            Some(frame) => Poll::Ready(Some(Ok(frame))),
            None => Pin::new(&mut this.rest).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.prefix.is_empty() && self.rest.is_end_stream()
    }
}
