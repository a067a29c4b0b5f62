//! A request body the caller can make again, so that a body of any size is retried without
//! being held in memory (H7).

use std::fmt;
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, ReadBuf};

use crate::body::{BoxError, RetryBody};

/// How much of a file one frame carries.
const FILE_CHUNK: usize = 64 * 1024;

type Make = dyn Fn() -> RetryBody + Send + Sync;

/// A request body made afresh for every attempt, set as a request extension: a body of any
/// size — a file, or one a function makes again — is retried without being held in memory
/// (H7).
///
/// A request that carries one sends the bodies it makes, the first attempt's included, and
/// must have an empty body of its own: one with a body too is refused before anything is sent,
/// since only one of the two could go out. Without it, the tower layer and `Client` keep a
/// request body in memory for replay up to their cap (64 KiB) and the reqwest middleware
/// replays a body of bytes; a larger body, or a stream, is sent once, and its call stops with
/// [`StopReason::NotReplayable`] where it would have retried.
///
/// Works with [`Client`](crate::Client) and [`RetryLayer`](crate::RetryLayer) as
/// `Request::extensions_mut().insert(..)`, and with the reqwest middleware as
/// `RequestBuilder::with_extension(..)`.
///
/// ```no_run
/// use http_body_util::Empty;
/// use nresilience_client::{Client, Reopen};
/// use nresilience_core::RetryPolicy;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// let client = Client::new(RetryPolicy::default());
/// // A PUT is idempotent: retried without an opt-in, the file read again for each attempt.
/// let upload = http::Request::put("http://127.0.0.1:8080/backups/today")
///     .extension(Reopen::file("backup.tar").await?)
///     .body(Empty::<bytes::Bytes>::new())?;
/// let response = client.request(upload).await?;
/// assert!(response.status().is_success());
/// # Ok(()) }
/// ```
///
/// [`StopReason::NotReplayable`]: nresilience_core::StopReason::NotReplayable
#[derive(Clone)]
pub struct Reopen {
    make: Arc<Make>,
}

impl Reopen {
    /// A body `make` makes again for every attempt: each call must return the whole body
    /// from its start.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use http_body::Body;
    /// use http_body_util::Full;
    /// use nresilience_client::Reopen;
    ///
    /// let reopen = Reopen::new(|| Full::new(Bytes::from_static(b"report")));
    /// assert_eq!(reopen.body().size_hint().exact(), Some(6));
    /// ```
    pub fn new<F, B>(make: F) -> Self
    where
        F: Fn() -> B + Send + Sync + 'static,
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        Self {
            make: Arc::new(move || RetryBody::streamed(make())),
        }
    }

    /// The file at `path`, read from its start by every attempt, its length (read now) sent
    /// as `Content-Length`.
    ///
    /// # Errors
    ///
    /// The file cannot be read now (`NotFound`, `PermissionDenied` …), or `path` names
    /// something other than a file (`InvalidInput`). A file that is shorter by the time an
    /// attempt reads it fails that attempt's body with `UnexpectedEof`; only its length as read
    /// now is sent.
    pub async fn file(path: impl Into<PathBuf>) -> io::Result<Self> {
        let path: Arc<Path> = path.into().into();
        let metadata = tokio::fs::metadata(&path).await?;
        if !metadata.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} is not a file", path.display()),
            ));
        }
        let len = metadata.len();
        Ok(Self::new(move || FileBody::new(&path, len)))
    }

    /// A fresh body, from its start.
    #[must_use]
    pub fn body(&self) -> RetryBody {
        (self.make)()
    }
}

impl fmt::Debug for Reopen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reopen").finish_non_exhaustive()
    }
}

/// The first `len` bytes of a file, opened when first polled.
struct FileBody {
    state: FileState,
    /// The bytes still to send.
    left: u64,
    len: u64,
}

type Opening = Pin<Box<dyn Future<Output = io::Result<tokio::fs::File>> + Send>>;

enum FileState {
    Opening(Opening),
    Reading(tokio::fs::File, Vec<u8>),
    Done,
}

impl FileBody {
    fn new(path: &Path, len: u64) -> Self {
        let state = if len == 0 {
            FileState::Done
        } else {
            FileState::Opening(Box::pin(tokio::fs::File::open(path.to_path_buf())))
        };
        Self {
            state,
            left: len,
            len,
        }
    }
}

impl Body for FileBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let this = self.get_mut();
        loop {
            match &mut this.state {
                FileState::Opening(opening) => match ready!(opening.as_mut().poll(cx)) {
                    Ok(file) => this.state = FileState::Reading(file, vec![0; FILE_CHUNK]),
                    Err(error) => {
                        this.state = FileState::Done;
                        return Poll::Ready(Some(Err(error)));
                    }
                },
                FileState::Reading(file, chunk) => {
                    let want = usize::try_from(this.left)
                        .map_or(chunk.len(), |left| left.min(chunk.len()));
                    let mut buf = ReadBuf::new(&mut chunk[..want]);
                    let read = ready!(Pin::new(file).poll_read(cx, &mut buf));
                    let filled = buf.filled().len();
                    let frame = match read {
                        Err(error) => Err(error),
                        Ok(()) if filled == 0 => Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "the file is shorter than when it was opened for the request",
                        )),
                        Ok(()) => {
                            this.left -= filled as u64;
                            Ok(Frame::data(Bytes::copy_from_slice(&chunk[..filled])))
                        }
                    };
                    if frame.is_err() || this.left == 0 {
                        this.state = FileState::Done;
                    }
                    return Poll::Ready(Some(frame));
                }
                FileState::Done => return Poll::Ready(None),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.state, FileState::Done)
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.left.min(self.len))
    }
}

/// A body reqwest can send: it asks for one that is `Sync` as well.
#[cfg(feature = "reqwest")]
pub(crate) fn reqwest_body(body: RetryBody) -> ::reqwest::Body {
    ::reqwest::Body::wrap(SyncBody(std::sync::Mutex::new(body)))
}

/// A body behind a lock no one contends: polled through `&mut`, it is never taken.
#[cfg(feature = "reqwest")]
struct SyncBody(std::sync::Mutex<RetryBody>);

#[cfg(feature = "reqwest")]
impl SyncBody {
    fn get(&self) -> std::sync::MutexGuard<'_, RetryBody> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(feature = "reqwest")]
impl Body for SyncBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let body = self
            .get_mut()
            .0
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Pin::new(body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.get().is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.get().size_hint()
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;

    fn temp_file(name: &str, bytes: &[u8]) -> PathBuf {
        let path = std::env::temp_dir().join(format!("nresilience-{}-{name}", std::process::id()));
        std::fs::write(&path, bytes).unwrap();
        path
    }

    async fn read(body: RetryBody) -> Result<Bytes, BoxError> {
        Ok(body.collect().await?.to_bytes())
    }

    #[tokio::test]
    async fn h7_a_file_is_read_whole_by_every_body_with_its_length() {
        let bytes: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let path = temp_file("whole", &bytes);
        let reopen = Reopen::file(&path).await.unwrap();
        for _ in 0..2 {
            let body = reopen.body();
            assert_eq!(body.size_hint().exact(), Some(200_000));
            assert_eq!(read(body).await.unwrap(), bytes);
        }
        std::fs::remove_file(path).unwrap();
    }

    #[tokio::test]
    async fn h7_an_empty_file_is_an_empty_body() {
        let path = temp_file("empty", b"");
        let body = Reopen::file(&path).await.unwrap().body();
        assert!(body.is_end_stream());
        assert_eq!(read(body).await.unwrap(), Bytes::new());
        std::fs::remove_file(path).unwrap();
    }

    #[tokio::test]
    async fn h7_a_file_that_shrank_fails_its_body_and_one_that_grew_sends_its_length() {
        let path = temp_file("changed", &[7; 100_000]);
        let reopen = Reopen::file(&path).await.unwrap();
        std::fs::write(&path, [7; 10]).unwrap();
        let error = read(reopen.body()).await.unwrap_err();
        let error = error.downcast_ref::<io::Error>().unwrap();
        assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof);
        std::fs::write(&path, [7; 200_000]).unwrap();
        assert_eq!(read(reopen.body()).await.unwrap().len(), 100_000);
        std::fs::remove_file(path).unwrap();
    }

    #[tokio::test]
    async fn h7_a_missing_file_or_a_directory_is_refused_at_once() {
        let missing = std::env::temp_dir().join("nresilience-no-such-file");
        let error = Reopen::file(missing).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::NotFound);
        let error = Reopen::file(std::env::temp_dir()).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
        assert!(error.to_string().contains("is not a file"), "{error}");
    }

    #[tokio::test]
    async fn h7_a_file_removed_after_it_was_read_fails_its_body() {
        let path = temp_file("removed", &[1; 10]);
        let reopen = Reopen::file(&path).await.unwrap();
        std::fs::remove_file(&path).unwrap();
        let error = read(reopen.body()).await.unwrap_err();
        let error = error.downcast_ref::<io::Error>().unwrap();
        assert_eq!(error.kind(), io::ErrorKind::NotFound);
    }
}
