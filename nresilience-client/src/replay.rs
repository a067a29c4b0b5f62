//! What the attempts of a call that may retry are made from: the request as it was, its body
//! buffered while it fits the cap, or made again by the caller's [`Reopen`].

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http::request::Parts;
use http::{Extensions, HeaderMap, Method, Request, Uri, Version};
use http_body::{Body, Frame};

use crate::body::RetryBody;
use crate::reopen::Reopen;

/// What a retry is rebuilt from: the request as it was, with its body buffered.
pub(crate) struct Template {
    pub(crate) method: Method,
    pub(crate) uri: Uri,
    pub(crate) version: Version,
    pub(crate) headers: HeaderMap,
    pub(crate) extensions: Extensions,
    pub(crate) body: Replay,
}

/// How every attempt's body is made.
#[derive(Clone)]
pub(crate) enum Replay {
    /// A copy of the body read whole, within the cap.
    Buffered(Bytes),
    /// A body the caller makes again (H7).
    Reopen(Reopen),
}

impl Replay {
    fn body(self) -> RetryBody {
        match self {
            Self::Buffered(bytes) => RetryBody::buffered(bytes),
            Self::Reopen(reopen) => reopen.body(),
        }
    }
}

impl Template {
    /// The request of `parts`, each attempt's body made by `body`.
    pub(crate) fn new(parts: Parts, body: Replay) -> Self {
        Self {
            method: parts.method,
            uri: parts.uri,
            version: parts.version,
            headers: parts.headers,
            extensions: parts.extensions,
            body,
        }
    }

    /// What a call that makes one attempt sends: this request, with `body`.
    pub(crate) fn into_once(self, body: RetryBody) -> Source {
        let (mut parts, ()) = Request::new(()).into_parts();
        parts.method = self.method;
        parts.uri = self.uri;
        parts.version = self.version;
        parts.headers = self.headers;
        parts.extensions = self.extensions;
        Source::Once(Box::new((parts, body)))
    }

    /// A copy of the request, for one attempt.
    pub(crate) fn request(&self) -> Request<RetryBody> {
        self.copy().into_request()
    }

    /// The request itself, for the first attempt, leaving a copy behind for the next: the
    /// request's headers were stamped with room to spare, and a copy's have none, so the
    /// `Host` header the connection pool adds to an HTTP/1 request would grow them again.
    pub(crate) fn take(&mut self) -> Request<RetryBody> {
        let copy = self.copy();
        std::mem::replace(self, copy).into_request()
    }

    fn copy(&self) -> Self {
        Self {
            method: self.method.clone(),
            uri: self.uri.clone(),
            version: self.version,
            headers: self.headers.clone(),
            extensions: self.extensions.clone(),
            body: self.body.clone(),
        }
    }

    fn into_request(self) -> Request<RetryBody> {
        let mut request = Request::new(self.body.body());
        *request.method_mut() = self.method;
        *request.uri_mut() = self.uri;
        *request.version_mut() = self.version;
        *request.headers_mut() = self.headers;
        *request.extensions_mut() = self.extensions;
        request
    }
}

/// What the attempts are made from.
pub(crate) enum Source {
    /// The request as buffered, copied for every attempt. Boxed, as the next: the future is
    /// moved whole several times on its way to the runtime, and a request is most of it.
    Template(Box<Template>),
    /// The request of a call that makes one attempt.
    Once(Box<(Parts, RetryBody)>),
    /// That one attempt has gone out.
    Sent,
}

impl Source {
    /// The method, the URI and the headers the next attempt is sent with: what changes from
    /// attempt to attempt is written into the template before it is copied, so the copy is
    /// made at its final size.
    pub(crate) fn parts_mut(&mut self) -> (&Method, &Uri, &mut HeaderMap) {
        match self {
            Self::Template(template) => (&template.method, &template.uri, &mut template.headers),
            Self::Once(request) => {
                let parts = &mut request.0;
                (&parts.method, &parts.uri, &mut parts.headers)
            }
            Self::Sent => unreachable!("a call without a template makes one attempt"),
        }
    }

    /// The request the next attempt is sent as: the template itself for the `first`, a copy
    /// left in its place (see [`Template::take`]); a copy of the template for the others; or
    /// the one request of a call that makes one attempt. Built where it is passed on, not
    /// moved there.
    #[inline(always)]
    pub(crate) fn next_request(&mut self, first: bool) -> Request<RetryBody> {
        if let Self::Template(template) = self {
            return if first {
                template.take()
            } else {
                template.request()
            };
        }
        match std::mem::replace(self, Self::Sent) {
            Self::Once(request) => {
                let (parts, body) = *request;
                Request::from_parts(parts, body)
            }
            _ => unreachable!("a call without a template makes one attempt"),
        }
    }
}

/// The frames of a request body read so far, while they fit the cap.
pub(crate) struct Buffered {
    cap: usize,
    size: usize,
    pub(crate) frames: Vec<Frame<Bytes>>,
}

impl Buffered {
    pub(crate) fn new(cap: usize) -> Self {
        Self {
            cap,
            size: 0,
            frames: Vec::new(),
        }
    }

    /// Keeps `frame`; `false` once the body no longer fits the cap or carries trailers,
    /// which a replay would not reproduce.
    fn push(&mut self, frame: Frame<Bytes>) -> bool {
        let fits = match frame.data_ref() {
            Some(data) => {
                self.size += data.len();
                self.size <= self.cap
            }
            None => false,
        };
        self.frames.push(frame);
        fits
    }

    pub(crate) fn into_bytes(self) -> Bytes {
        let mut frames = self.frames.into_iter().filter_map(|f| f.into_data().ok());
        match (frames.next(), frames.next()) {
            (None, _) => Bytes::new(),
            (Some(only), None) => only,
            (Some(first), Some(second)) => {
                let mut all = BytesMut::with_capacity(self.size);
                all.extend_from_slice(&first);
                all.extend_from_slice(&second);
                frames.for_each(|f| all.extend_from_slice(&f));
                all.freeze()
            }
        }
    }
}

/// Reads the frames of the body that are ready now into `buffered`: `false` when it ended
/// within the cap (replayable), `true` when it outgrew the cap or is still producing (a
/// stream), with the rest still in `body`.
///
/// A stream is never waited for: its next message may depend on the response, and holding
/// it back until it ends would deadlock such a call or delay a slow upload.
pub(crate) fn buffer_ready<B>(
    body: &mut B,
    buffered: &mut Buffered,
    cx: &mut Context<'_>,
) -> Result<bool, B::Error>
where
    B: Body<Data = Bytes> + Unpin,
{
    loop {
        match Pin::new(&mut *body).poll_frame(cx) {
            Poll::Ready(None) => return Ok(false),
            Poll::Ready(Some(Err(error))) => return Err(error),
            Poll::Ready(Some(Ok(frame))) => {
                if !buffered.push(frame) {
                    return Ok(true);
                }
            }
            Poll::Pending => return Ok(true),
        }
    }
}
