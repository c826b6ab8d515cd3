//! A TCP proxy between a client and one target that can delay, stall or cut the traffic, to play
//! a slow network, a partition or a dropped link without touching the server.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// How long the proxy tries to reach its target for each accepted connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// What a [`TcpProxy`] does with the traffic; see [`TcpProxy::set_mode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ProxyMode {
    /// Forwards bytes as they come. The default.
    #[default]
    Pass,
    /// Holds each chunk read, in either direction, for this long before forwarding it; order is
    /// kept, and chunks in flight are delayed together, not one after another. A request and its
    /// reply thus take at least twice the duration.
    Delay(Duration),
    /// Reads bytes but holds them until the mode changes, as on a network partition: existing
    /// connections hang, new ones connect but get no answer. Held bytes are then forwarded.
    Stall,
    /// Closes every current connection and closes new ones as soon as they are accepted, until
    /// the mode changes.
    Cut,
}

#[derive(Debug, Clone, Copy)]
struct Control {
    mode: ProxyMode,
    stopped: bool,
}

/// A proxy listening on a free port of 127.0.0.1 that forwards each connection to one target.
///
/// Dropping it stops it and closes all its connections. Its tasks run on the tokio runtime it
/// was started on.
///
/// ```no_run
/// use std::time::Duration;
/// use leasehold_tests::harness::{ProxyMode, RedisServer, TcpProxy};
///
/// # async fn demo() {
/// let redis = RedisServer::start().await;
/// let proxy = TcpProxy::start(redis.addr()).await;
/// let mut conn = redis::Client::open(proxy.url()).unwrap()
///     .get_multiplexed_async_connection().await.unwrap();
/// proxy.set_mode(ProxyMode::Delay(Duration::from_millis(100)));
/// let _: String = redis::cmd("PING").query_async(&mut conn).await.unwrap(); // ≥ 200 ms
/// proxy.set_mode(ProxyMode::Cut);
/// assert!(redis::cmd("PING").query_async::<String>(&mut conn).await.is_err());
/// # }
/// ```
#[derive(Debug)]
pub struct TcpProxy {
    addr: SocketAddr,
    target: SocketAddr,
    control: watch::Sender<Control>,
    accepting: JoinHandle<()>,
}

impl TcpProxy {
    /// Starts a proxy to `target` in [`ProxyMode::Pass`]. The target need not be up yet: each
    /// client connection is matched with a new connection to it, or closed if it cannot be made
    /// within 5 s.
    ///
    /// # Panics
    ///
    /// If no port of 127.0.0.1 can be bound; outside a tokio runtime.
    pub async fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .unwrap_or_else(|e| {
                panic!("cannot bind a port of 127.0.0.1 for a proxy to {target}: {e}")
            });
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("cannot read the proxy's address: {e}"));
        let (control, watching) = watch::channel(Control {
            mode: ProxyMode::Pass,
            stopped: false,
        });
        let accepting = tokio::spawn(accept_loop(listener, target, watching));
        Self {
            addr,
            target,
            control,
            accepting,
        }
    }

    /// `redis://127.0.0.1:PORT` of the proxy, to hand to the client under test.
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }

    /// The address the proxy listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The address the proxy forwards to.
    pub fn target(&self) -> SocketAddr {
        self.target
    }

    /// The current mode.
    pub fn mode(&self) -> ProxyMode {
        self.control.borrow().mode
    }

    /// Switches the mode for all current and future connections. Takes effect before any byte
    /// read afterwards is forwarded; a connection cut by [`ProxyMode::Cut`] stays closed when
    /// the mode changes back.
    pub fn set_mode(&self, mode: ProxyMode) {
        self.control.send_modify(|control| control.mode = mode);
    }

    /// Stops listening and closes all connections; the same as dropping the proxy.
    pub fn stop(&self) {
        self.control.send_modify(|control| control.stopped = true);
        self.accepting.abort();
    }
}

impl Drop for TcpProxy {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn accept_loop(
    listener: TcpListener,
    target: SocketAddr,
    mut control: watch::Receiver<Control>,
) {
    loop {
        let accepted = tokio::select! {
            biased;
            _ = control.wait_for(|c| c.stopped) => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((client, _)) = accepted else {
            // Out of file descriptors or the like: back off rather than spin.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        if control.borrow().mode == ProxyMode::Cut {
            drop(client);
            continue;
        }
        tokio::spawn(relay(client, target, control.clone()));
    }
}

/// Carries one client connection until either side closes, the mode becomes `Cut`, or the proxy
/// stops; dropping the sockets then closes both sides.
async fn relay(client: TcpStream, target: SocketAddr, mut control: watch::Receiver<Control>) {
    let severed = |c: &Control| c.stopped || c.mode == ProxyMode::Cut;
    let server = tokio::select! {
        biased;
        _ = control.wait_for(severed) => return,
        server = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(target)) => match server {
            Ok(Ok(server)) => server,
            _ => return,
        },
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (from_client, to_client) = client.into_split();
    let (from_server, to_server) = server.into_split();
    let (upstream, downstream) = (control.clone(), control.clone());
    let both_ways = async {
        tokio::join!(
            pipe(from_client, to_server, upstream),
            pipe(from_server, to_client, downstream),
        )
    };
    tokio::select! {
        biased;
        _ = control.wait_for(severed) => {}
        _ = both_ways => {}
    }
}

/// Bytes read from one side, and when they may be written to the other.
struct Chunk {
    bytes: Vec<u8>,
    release_at: Instant,
}

/// Copies one direction: a reader that timestamps chunks as they arrive, and a writer that holds
/// each until its time has come and the mode is not `Stall`. The queue between them is unbounded,
/// which is fine for the few bytes a test sends.
async fn pipe(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, control: watch::Receiver<Control>) {
    let (queue, mut queued) = mpsc::unbounded_channel::<Chunk>();
    let reading_control = control.clone();
    let read = async move {
        let mut buf = vec![0; 16 * 1024];
        // Ok(0) is end of stream; dropping `queue` then lets the writer half-close.
        while let Ok(n @ 1..) = from.read(&mut buf).await {
            let delay = match reading_control.borrow().mode {
                ProxyMode::Delay(delay) => delay,
                _ => Duration::ZERO,
            };
            let chunk = Chunk {
                bytes: buf[..n].to_vec(),
                release_at: Instant::now() + delay,
            };
            if queue.send(chunk).is_err() {
                return;
            }
        }
    };
    let write = async move {
        let mut control = control;
        while let Some(chunk) = queued.recv().await {
            if hold(&chunk, &mut control).await.is_err()
                || to.write_all(&chunk.bytes).await.is_err()
            {
                return;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(read, write);
}

/// Waits until `chunk` may be forwarded; an error once the proxy is gone.
async fn hold(chunk: &Chunk, control: &mut watch::Receiver<Control>) -> io::Result<()> {
    let gone = |_| io::Error::from(io::ErrorKind::BrokenPipe);
    loop {
        let mode = control.borrow_and_update().mode;
        if mode == ProxyMode::Stall {
            control.changed().await.map_err(gone)?;
        } else if Instant::now() < chunk.release_at {
            tokio::select! {
                _ = tokio::time::sleep_until(chunk.release_at) => {}
                changed = control.changed() => changed.map_err(gone)?,
            }
        } else {
            return Ok(());
        }
    }
}
