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
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use poem::endpoint::{BoxEndpoint, DynEndpoint};
use poem::http;
use poem::http::uri::Scheme;
use poem::web::{LocalAddr, RemoteAddr};
use poem::{Addr, Endpoint, EndpointExt, Response};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tracing::{debug, warn};

use super::idle::IdleIo;

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
        *self.0.parked.lock().unwrap_or_else(|e| e.into_inner()) = Some(answer);
    }

    /// Whether a handler has parked the request's answer.
    pub fn is_parked(&self) -> bool {
        self.0
            .parked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// Wraps the parked answer (the outer layers time and log the request when it is answered,
    /// not when it is parked); nothing when none is parked.
    pub fn wrap(&self, f: impl FnOnce(Parked) -> Parked) {
        let mut parked = self.0.parked.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(answer) = parked.take() {
            *parked = Some(f(answer));
        }
    }

    fn take(&self) -> Option<Parked> {
        self.0
            .parked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
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
    // Each connection task holds a sender; `recv` returns `None` when the last has gone.
    let (alive_tx, mut alive_rx) = mpsc::channel::<()>(1);
    tokio::pin!(stop);
    loop {
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
                    remote,
                    stopping: stopping_rx.clone(),
                    idle,
                };
                let alive = alive_tx.clone();
                tokio::spawn(async move {
                    conn.serve(stream).await;
                    drop(alive);
                });
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
    drop(alive_tx);
    if tokio::time::timeout(grace, alive_rx.recv()).await.is_err() {
        debug!("connections still open after the grace period; dropped");
    }
}

struct Conn {
    ep: Arc<BoxEndpoint<'static>>,
    local: LocalAddr,
    remote: SocketAddr,
    stopping: watch::Receiver<bool>,
    idle: Duration,
}

/// What a client sends first on an HTTP/2 connection with prior knowledge (RFC 9113 §3.4); no
/// HTTP/1 method begins with these bytes.
const H2_PREFIX: &[u8] = b"PRI";

impl Conn {
    async fn serve(self, stream: TcpStream) {
        let h2 = match tokio::time::timeout(self.idle, starts_with(&stream, H2_PREFIX)).await {
            Ok(Ok(h2)) => h2,
            // Silent for the whole idle time, or gone.
            _ => return,
        };
        let io = TokioIo::new(IdleIo::new(stream, self.idle));
        let mut stopping = self.stopping.clone();
        let Conn {
            ep,
            local,
            remote,
            stopping: stop_rx,
            ..
        } = self;
        let remote = RemoteAddr(Addr::SocketAddr(remote));
        let service = hyper::service::service_fn(move |req: http::Request<Incoming>| {
            answer(
                ep.clone(),
                req,
                local.clone(),
                remote.clone(),
                stop_rx.clone(),
            )
        });
        if h2 {
            let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .serve_connection(io, service);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => return,
                _ = stopping.wait_for(|s| *s) => {}
            }
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        } else {
            let conn = hyper::server::conn::http1::Builder::new().serve_connection(io, service);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => return,
                _ = stopping.wait_for(|s| *s) => {}
            }
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

/// One request through the application; a parked answer is awaited here, after the layers'
/// futures are gone.
async fn answer(
    ep: Arc<BoxEndpoint<'static>>,
    req: http::Request<Incoming>,
    local: LocalAddr,
    remote: RemoteAddr,
    stopping: watch::Receiver<bool>,
) -> Result<http::Response<BoxBody<Bytes, std::io::Error>>, Infallible> {
    let slot = ParkSlot::new(stopping);
    let mut req = poem::Request::from((req, local, remote, Scheme::HTTP));
    req.extensions_mut().insert(slot.clone());
    let placeholder = match DynEndpoint::call(&**ep, req).await {
        Ok(resp) => resp,
        Err(e) => e.into_response(),
    };
    let resp = match slot.take() {
        None => placeholder,
        Some(parked) => {
            let headers = placeholder.into_parts().0.headers;
            let mut resp = parked.await;
            let own = resp.headers_mut();
            let mut last = None;
            for (name, value) in headers {
                // `HeaderMap`'s iterator names a header once, before all its values.
                if let Some(name) = name {
                    last = (!own.contains_key(&name)).then_some(name);
                }
                if let Some(name) = &last {
                    own.append(name.clone(), value);
                }
            }
            resp
        }
    };
    Ok(resp.into())
}

/// Whether the stream's first bytes are `prefix` (peeked: they stay to be read).
async fn starts_with(stream: &TcpStream, prefix: &[u8]) -> std::io::Result<bool> {
    let mut buf = [0u8; 8];
    let want = prefix.len().min(buf.len());
    loop {
        let n = stream.peek(&mut buf[..want]).await?;
        if n == 0 || buf[..n] != prefix[..n] {
            return Ok(false);
        }
        if n == want {
            return Ok(true);
        }
        // A partial match (a byte or two of "PRI"): wait for the rest.
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}
