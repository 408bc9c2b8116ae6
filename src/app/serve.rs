//! The public listener's HTTP server: hyper's HTTP/1 connection (HTTP/2 with prior knowledge when
//! a client opens with its preface) serving the poem application, with long-polls parked
//! outside the request stack.
//!
//! Why not `poem::Server`: a `?wait=` long-poll may sit for 90 s, and under poem's server each
//! waiting request held ≈52–60 KiB — the request's future at every boxing point of poem's
//! layers (≈26 KiB), a 16 KiB connection task (hyper-util's HTTP/1-or-2 future), and hyper's two
//! 8 KiB buffers (see README, Benchmarks). Here a handler that is about to wait puts its wait
//! in the request's [`ParkSlot`] and returns at once; the stack's futures are dropped, and the
//! connection waits on the parked future alone (a few hundred bytes), then sends its answer with
//! the headers the layers added to the placeholder. The HTTP/1 connection task is hyper's own
//! `http1::Connection` (a few hundred bytes beside its buffers).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use hyper::body::{Body as _, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use poem::endpoint::{BoxEndpoint, DynEndpoint};
use poem::http;
use poem::http::uri::Scheme;
use poem::web::{LocalAddr, RemoteAddr};
use poem::{Addr, Endpoint, EndpointExt, Response};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tracing::{debug, warn};

use super::idle::IdleIo;
use crate::lock;

/// A parked request's answer, made when its wait ends.
pub type Parked = Pin<Box<dyn Future<Output = Response> + Send>>;

/// Put in every request's extensions by the server: a handler whose answer needs a wait leaves
/// the wait here (with [`ParkSlot::park`]) and returns a placeholder answer at once. Requests
/// not served by this server (tests calling an endpoint directly) carry no slot, and their
/// handlers wait inline.
#[derive(Clone)]
pub struct ParkSlot(Arc<SlotInner>);

struct SlotInner {
    parked: Mutex<Option<Parked>>,
    stopping: watch::Receiver<bool>,
}

impl ParkSlot {
    fn new(stopping: watch::Receiver<bool>) -> ParkSlot {
        ParkSlot(Arc::new(SlotInner {
            parked: Mutex::new(None),
            stopping,
        }))
    }

    /// Leaves the request's real answer to `answer`; the response the handler returns is then
    /// only a placeholder whose headers the answer inherits (those it does not set itself).
    pub fn park(&self, answer: Parked) {
        *lock(&self.0.parked) = Some(answer);
    }

    /// Whether a handler has parked the request's answer.
    pub fn is_parked(&self) -> bool {
        lock(&self.0.parked).is_some()
    }

    /// Wraps the parked answer (the outer layers time and log the request when it is answered,
    /// not when it is parked); nothing when none is parked.
    pub fn wrap(&self, f: impl FnOnce(Parked) -> Parked) {
        let mut parked = lock(&self.0.parked);
        if let Some(answer) = parked.take() {
            *parked = Some(f(answer));
        }
    }

    fn take(&self) -> Option<Parked> {
        lock(&self.0.parked).take()
    }

    /// Becomes `true` when the server begins to stop: a parked wait then answers at once with
    /// what it has (a client gets the job's state instead of a dropped connection).
    pub fn stopping(&self) -> watch::Receiver<bool> {
        self.0.stopping.clone()
    }
}

/// Serves `app` on `listener` until `stop` resolves; then stops accepting, asks every connection
/// to finish its request in flight (parked waits answer at once) and gives them `grace` to do so.
pub async fn run<E: Endpoint + 'static>(
    listener: TcpListener,
    app: E,
    idle: Duration,
    stop: impl Future<Output = ()>,
    grace: Duration,
) {
    let local = match listener.local_addr() {
        Ok(a) => LocalAddr(Addr::SocketAddr(a)),
        Err(e) => {
            warn!(error = %e, "the listener has no address; not serving");
            return;
        }
    };
    let ep: Arc<BoxEndpoint<'static>> = Arc::new(app.map_to_response().boxed());
    let (stopping_tx, stopping_rx) = watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    tokio::pin!(stop);
    loop {
        // Finished connections leave the set as new ones come.
        while connections.try_join_next().is_some() {}
        let accepted = tokio::select! {
            _ = &mut stop => break,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, remote)) => {
                let _ = stream.set_nodelay(true);
                let conn = Conn {
                    ep: ep.clone(),
                    local: local.clone(),
                    remote: RemoteAddr(Addr::SocketAddr(remote)),
                    stopping: stopping_rx.clone(),
                    idle,
                };
                connections.spawn(conn.serve(stream));
            }
            Err(e) => {
                // Out of file descriptors, most likely: wait for some to be freed rather than
                // spin on the error.
                warn!(error = %e, "cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    drop(listener);
    let _ = stopping_tx.send(true);
    let all_closed = async { while connections.join_next().await.is_some() {} };
    if tokio::time::timeout(grace, all_closed).await.is_err() {
        debug!(
            open = connections.len(),
            "connections still open after the grace period; closed"
        );
        connections.shutdown().await;
    }
}

struct Conn {
    ep: Arc<BoxEndpoint<'static>>,
    local: LocalAddr,
    remote: RemoteAddr,
    stopping: watch::Receiver<bool>,
    idle: Duration,
}

/// What a client sends first on an HTTP/2 connection with prior knowledge (RFC 9113 §3.4); no
/// HTTP/1 method begins with these bytes.
const H2_PREFIX: &[u8] = b"PRI";

impl Conn {
    async fn serve(self, stream: TcpStream) {
        let mut stopping = self.stopping.clone();
        let first = tokio::time::timeout(self.idle, starts_with(&stream, H2_PREFIX));
        let h2 = tokio::select! {
            first = first => match first {
                Ok(Ok(h2)) => h2,
                // Silent for the whole idle time, or gone.
                _ => return,
            },
            // A connection that has sent nothing yet is closed at once by a stop.
            _ = stopping.wait_for(|s| *s) => return,
        };
        let io = IdleIo::new(stream, self.idle);
        if h2 {
            // Boxed: the HTTP/2 connection's state is large, and HTTP/1 tasks need not carry it.
            Box::pin(self.serve_h2(io)).await
        } else {
            self.serve_http1(io).await
        }
    }

    fn service(
        &self,
        handoff: Option<Arc<Handoff>>,
    ) -> impl hyper::service::Service<
        http::Request<Incoming>,
        Response = http::Response<BoxBody<Bytes, std::io::Error>>,
        Error = Infallible,
        Future: Send,
    > + Unpin
    + Send
    + 'static {
        let (ep, local, remote) = (self.ep.clone(), self.local.clone(), self.remote.clone());
        let stopping = self.stopping.clone();
        hyper::service::service_fn(move |req: http::Request<Incoming>| {
            answer(
                ep.clone(),
                req,
                (local.clone(), remote.clone()),
                stopping.clone(),
                handoff.clone(),
            )
        })
    }

    async fn serve_h2(self, io: IdleIo<TcpStream>) {
        let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
            .serve_connection(TokioIo::new(io), self.service(None));
        tokio::pin!(conn);
        let mut stopping = self.stopping.clone();
        tokio::select! {
            _ = conn.as_mut() => return,
            _ = stopping.wait_for(|s| *s) => {}
        }
        conn.as_mut().graceful_shutdown();
        let _ = conn.await;
    }

    /// Serves HTTP/1 requests with hyper until a request parks: then hyper's connection (its
    /// buffers, its task state) is let go, the parked answer is awaited and written here, and a
    /// new hyper connection takes the stream up again for the next request.
    async fn serve_http1(self, mut io: IdleIo<TcpStream>) {
        let mut stopping = self.stopping.clone();
        let mut leftover = Bytes::new();
        loop {
            let handoff = Arc::new(Handoff::default());
            let tracked = Tracked {
                inner: io,
                prefix: leftover,
                handoff: handoff.clone(),
            };
            // Boxed: the task keeps a pointer while hyper serves, not hyper's state.
            let mut conn = Box::new(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tracked), self.service(Some(handoff.clone()))),
            );
            let mut shutting_down = false;
            let parked = loop {
                tokio::select! {
                    _ = &mut *conn => return,
                    _ = handoff.notify.notified() => break handoff.take(),
                    _ = stopping.wait_for(|s| *s), if !shutting_down => {
                        shutting_down = true;
                        Pin::new(&mut *conn).graceful_shutdown();
                    }
                }
            };
            let Some(parked) = parked else { return };
            // hyper documents `into_parts` for a finished connection. Here a request is in
            // flight, which hyper 1.12 makes safe to take apart: it reads no further request
            // while one is in flight, an earlier answer was fully encoded before this request
            // was read, and `answer` hands over only once that answer is flushed (`unflushed`);
            // what hyper read past this request comes back in `read_buf`.
            let parts = (*conn).into_parts();
            DETACHED.fetch_add(1, Ordering::Relaxed);
            let (tracked, read_buf) = (parts.io.into_inner(), parts.read_buf);
            drop(parts.service);
            io = tracked.inner;
            // Bytes after the parked request (a pipelined request) are served next: copied, as
            // `read_buf` is a view of hyper's whole 8 KiB read buffer.
            leftover = if read_buf.is_empty() && tracked.prefix.is_empty() {
                Bytes::new()
            } else {
                [&read_buf[..], &tracked.prefix[..]].concat().into()
            };
            drop(read_buf);
            let Detached {
                answer,
                headers,
                head,
                close,
            } = parked;
            let mut resp = tokio::select! {
                resp = answer => resp,
                // Nobody to answer: the client hung up.
                _ = hung_up(io.get_ref()), if leftover.is_empty() => return,
            };
            inherit(&mut resp, headers);
            let close = close || *stopping.borrow();
            // Boxed: its buffers are in the task's state only while it writes. A client that
            // does not read its answer within the idle time is let go.
            let write = Box::pin(write_answer(&mut io, resp, head, close));
            if !matches!(tokio::time::timeout(self.idle, write).await, Ok(Ok(()))) || close {
                let _ = io.shutdown().await;
                return;
            }
        }
    }
}

/// Parked requests whose connection left hyper (see [`detached_count`]).
static DETACHED: AtomicU64 = AtomicU64::new(0);

/// How many parked requests have had their connection taken from hyper since the process
/// started (for tests: the answers look the same either way).
#[doc(hidden)]
pub fn detached_count() -> u64 {
    DETACHED.load(Ordering::Relaxed)
}

/// A parked request handed from its service call to the connection's task.
struct Detached {
    answer: Parked,
    /// The placeholder's headers (see [`inherit`]).
    headers: http::HeaderMap,
    head: bool,
    close: bool,
}

/// Between one hyper connection's service calls and the task that runs it.
#[derive(Default)]
struct Handoff {
    parked: Mutex<Option<Detached>>,
    notify: tokio::sync::Notify,
    /// Bytes were given to the socket and not yet flushed: hyper may hold more of an earlier
    /// answer, so the connection is not taken from it.
    unflushed: AtomicBool,
}

impl Handoff {
    fn put(&self, d: Detached) {
        *lock(&self.parked) = Some(d);
        self.notify.notify_one();
    }

    fn take(&self) -> Option<Detached> {
        lock(&self.parked).take()
    }
}

/// The stream as hyper sees it: unread bytes from the previous hyper connection first, and the
/// flush state noted for [`Handoff::unflushed`].
struct Tracked<T> {
    inner: T,
    prefix: Bytes,
    handoff: Arc<Handoff>,
}

impl<T: AsyncRead + Unpin> AsyncRead for Tracked<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if !self.prefix.is_empty() {
            let n = self.prefix.len().min(buf.remaining());
            let chunk = self.prefix.split_to(n);
            buf.put_slice(&chunk);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Tracked<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.handoff.unflushed.store(true, Ordering::Relaxed);
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_flush(cx);
        if matches!(r, Poll::Ready(Ok(()))) {
            self.handoff.unflushed.store(false, Ordering::Relaxed);
        }
        r
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Resolves when the peer has closed the connection (or it failed); never while it is open.
async fn hung_up(stream: &TcpStream) {
    let mut byte = [0u8; 1];
    match stream.peek(&mut byte).await {
        Ok(0) | Err(_) => {}
        // It sent more (its next request): it is still there.
        Ok(_) => std::future::pending().await,
    }
}

/// Adds the placeholder's headers (the layers' own: the request id…) that the answer does not
/// set itself.
fn inherit(resp: &mut Response, headers: http::HeaderMap) {
    use http::header::{CONNECTION, CONTENT_LENGTH, CONTENT_TYPE, TRANSFER_ENCODING};
    let own = resp.headers_mut();
    let mut last = None;
    for (name, value) in headers {
        // `HeaderMap`'s iterator names a header once, before all its values. The placeholder's
        // framing and type describe its own body, not the answer's.
        if let Some(name) = name {
            let framing = [CONTENT_LENGTH, TRANSFER_ENCODING, CONNECTION, CONTENT_TYPE];
            last = (!own.contains_key(&name) && !framing.contains(&name)).then_some(name);
        }
        if let Some(name) = &last {
            own.append(name.clone(), value);
        }
    }
}

/// Writes a parked request's answer as HTTP/1.1, as hyper would have: the status line, the
/// headers, `content-length`, `date`, and `connection: close` when the connection ends.
async fn write_answer(
    io: &mut IdleIo<TcpStream>,
    resp: Response,
    head: bool,
    close: bool,
) -> std::io::Result<()> {
    use std::io::Write;
    let (parts, body) = resp.into_parts();
    let body = body
        .into_bytes()
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let status = parts.status;
    // RFC 9112 §6.3: no body (and no length) for 1xx, 204 and 304.
    let bodiless = status.is_informational()
        || status == http::StatusCode::NO_CONTENT
        || status == http::StatusCode::NOT_MODIFIED;
    let mut out = Vec::with_capacity(256 + body.len());
    write!(
        out,
        "HTTP/1.1 {} {}\r\n",
        status.as_str(),
        status.canonical_reason().unwrap_or("")
    )?;
    for (name, value) in &parts.headers {
        use http::header::{CONNECTION, CONTENT_LENGTH, DATE, TRANSFER_ENCODING};
        if [CONTENT_LENGTH, TRANSFER_ENCODING, CONNECTION, DATE].contains(name) {
            continue;
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if !bodiless {
        write!(out, "content-length: {}\r\n", body.len())?;
    }
    write!(
        out,
        "date: {}\r\n",
        httpdate::fmt_http_date(std::time::SystemTime::now())
    )?;
    if close {
        out.extend_from_slice(b"connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
    if !head && !bodiless {
        out.extend_from_slice(&body);
    }
    io.write_all(&out).await?;
    io.flush().await
}

/// One request through the application. A parked answer is awaited after the layers' futures
/// are gone: on an HTTP/1 connection (`handoff`) by the connection's task, which takes the
/// stream from hyper first; otherwise here.
async fn answer(
    ep: Arc<BoxEndpoint<'static>>,
    req: http::Request<Incoming>,
    (local, remote): (LocalAddr, RemoteAddr),
    stopping: watch::Receiver<bool>,
    handoff: Option<Arc<Handoff>>,
) -> Result<http::Response<BoxBody<Bytes, std::io::Error>>, Infallible> {
    // Only a bodiless HTTP/1.1 request leaves hyper with nothing half-read.
    let detachable = req.version() == http::Version::HTTP_11 && req.body().is_end_stream();
    let head = req.method() == http::Method::HEAD;
    let close = req
        .headers()
        .get_all(http::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("close"));
    let slot = ParkSlot::new(stopping);
    let mut req = poem::Request::from((req, local, remote, Scheme::HTTP));
    req.extensions_mut().insert(slot.clone());
    let placeholder = match DynEndpoint::call(&**ep, req).await {
        Ok(resp) => resp,
        Err(e) => e.into_response(),
    };
    let resp = match slot.take() {
        None => placeholder,
        Some(answer) => {
            let headers = placeholder.into_parts().0.headers;
            if let Some(handoff) =
                handoff.filter(|h| detachable && !h.unflushed.load(Ordering::Relaxed))
            {
                handoff.put(Detached {
                    answer,
                    headers,
                    head,
                    close,
                });
                // hyper's connection (and this call with it) is dropped by the task.
                return std::future::pending().await;
            }
            let mut resp = answer.await;
            inherit(&mut resp, headers);
            resp
        }
    };
    Ok(resp.into())
}

/// Whether the stream's first bytes are `prefix` (peeked: they stay to be read).
async fn starts_with(stream: &TcpStream, prefix: &[u8]) -> std::io::Result<bool> {
    let mut buf = [0u8; 8];
    let want = prefix.len().min(buf.len());
    let mut pause = Duration::from_millis(1);
    loop {
        let n = stream.peek(&mut buf[..want]).await?;
        if n == 0 || buf[..n] != prefix[..n] {
            return Ok(false);
        }
        if n == want {
            return Ok(true);
        }
        // A partial match (a byte or two of "PRI"): wait for the rest, less and less often,
        // so a client that stalls there costs a few wake-ups a second (the caller's idle
        // timeout ends it).
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(250));
    }
}
