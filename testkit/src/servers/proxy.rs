//! A TCP proxy between a client and one target that can delay, stall or cut the traffic, to play
//! a slow network, a partition or a dropped link without touching the server; to all connections,
//! only to those of one kind (command or subscription connections), or to the one connection
//! that sends a given request ([`TcpProxy::hold_next_sending`]: a call whose reply is late or
//! lost, or that reaches the server after its client gave up).

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// How long the proxy tries to reach its target for each accepted connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How many bytes of a connection the proxy reads for command names before it gives up and
/// keeps calling it a command connection: a client subscribes within its first few commands.
const SNIFF_LIMIT: usize = 64 * 1024;

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

/// The two kinds of connection a Redis client opens, told apart by what the client sends; see
/// [`TcpProxy::set_mode_for`].
///
/// A connection is a [`Subscription`](Self::Subscription) one from the first chunk in which the
/// client sends `SUBSCRIBE`, `SSUBSCRIBE` or `PSUBSCRIBE` (RESP arrays or inline commands, any
/// case), and stays one; until then it is a [`Command`](Self::Command) one. Sniffing beats
/// counting connections: a client reconnects in any order, and a reconnected subscription
/// connection is recognised again by its first `SUBSCRIBE`. The price: a subscription
/// connection's handshake (`HELLO`, `AUTH`, `CLIENT SETINFO`), sent before it subscribes, goes
/// under the command connections' mode, and a new connection accepted while that mode is
/// [`ProxyMode::Cut`] is closed whatever it would have become.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConnKind {
    /// Every connection until it subscribes: the one leasehold runs its lock scripts on.
    Command,
    /// A connection that has subscribed to a channel: leasehold's wake-up connection.
    Subscription,
}

#[derive(Debug, Clone, Copy)]
struct Control {
    command: ProxyMode,
    subscription: ProxyMode,
    /// The modes leave the connections that traps caught alone ([`TcpProxy::set_mode_sparing_caught`]).
    spare_caught: bool,
    stopped: bool,
    /// Held connections caught by traps up to this number are delivered.
    released: u64,
    /// Held connections caught by traps up to this number are closed.
    cut: u64,
}

impl Control {
    fn mode(&self, kind: ConnKind) -> ProxyMode {
        match kind {
            ConnKind::Command => self.command,
            ConnKind::Subscription => self.subscription,
        }
    }

    fn severs(&self, kind: ConnKind) -> bool {
        self.stopped || self.mode(kind) == ProxyMode::Cut
    }

    /// Whether a connection held by trap `id` still holds the bytes of its held direction.
    fn holds(&self, id: u64) -> bool {
        self.released < id && self.cut < id
    }
}

/// Which bytes of a connection caught by [`TcpProxy::hold_next_sending`] the proxy holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Held {
    /// What the client sends, from the chunk that matched on: the request reaches the server
    /// late (after its client gave up, when held past the client's timeout) or never (cut).
    Requests,
    /// What the server sends back, from the instant of the match: the request is applied at
    /// once, and its reply is late or lost.
    Replies,
    /// Both directions.
    Both,
}

impl Held {
    fn covers(self, upstream: bool) -> bool {
        match self {
            Held::Requests => upstream,
            Held::Replies => !upstream,
            Held::Both => true,
        }
    }
}

/// The armed trap of a proxy, and how many connections traps caught.
#[derive(Debug, Default)]
struct Traps {
    armed: Option<Trap>,
    /// The number of the last trap armed (traps are numbered from 1).
    last: u64,
    caught: usize,
}

#[derive(Debug, Clone)]
struct Trap {
    id: u64,
    pattern: Arc<[u8]>,
    held: Held,
    /// Chunks holding the pattern still to let through before the one that springs it.
    skip: usize,
}

impl Traps {
    /// The armed trap, taken if `window` holds its pattern and no more such chunks are to be
    /// let through: one connection per trap.
    fn spring(&mut self, window: &[u8]) -> Option<Trap> {
        let trap = self.armed.as_mut()?;
        if trap.pattern.is_empty()
            || !window
                .windows(trap.pattern.len())
                .any(|w| w == &trap.pattern[..])
        {
            return None;
        }
        if trap.skip > 0 {
            trap.skip -= 1;
            return None;
        }
        self.caught += 1;
        self.armed.take()
    }
}

/// A proxy listening on a free port of 127.0.0.1 that forwards each connection to one target.
///
/// Dropping it stops it and closes all its connections. Its tasks run on the tokio runtime it
/// was started on.
///
/// ```no_run
/// use std::time::Duration;
/// use leasehold_testkit::servers::{ConnKind, ProxyMode, RedisServer, TcpProxy};
///
/// # async fn demo() {
/// let redis = RedisServer::start().await;
/// let proxy = TcpProxy::start(redis.addr()).await;
/// let mut conn = redis::Client::open(proxy.url()).unwrap()
///     .get_multiplexed_async_connection().await.unwrap();
/// proxy.set_mode(ProxyMode::Delay(Duration::from_millis(100)));
/// let _: String = redis::cmd("PING").query_async(&mut conn).await.unwrap(); // ≥ 200 ms
/// // Only the connections that subscribed are held; commands still go through.
/// proxy.set_mode(ProxyMode::Pass);
/// proxy.set_mode_for(ConnKind::Subscription, ProxyMode::Stall);
/// let _: String = redis::cmd("PING").query_async(&mut conn).await.unwrap();
/// proxy.set_mode(ProxyMode::Cut);
/// assert!(redis::cmd("PING").query_async::<String>(&mut conn).await.is_err());
/// # }
/// ```
#[derive(Debug)]
pub struct TcpProxy {
    addr: SocketAddr,
    target: SocketAddr,
    control: watch::Sender<Control>,
    traps: Arc<Mutex<Traps>>,
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
            command: ProxyMode::Pass,
            subscription: ProxyMode::Pass,
            spare_caught: false,
            stopped: false,
            released: 0,
            cut: 0,
        });
        let traps = Arc::new(Mutex::new(Traps::default()));
        let accepting = tokio::spawn(accept_loop(listener, target, watching, traps.clone()));
        Self {
            addr,
            target,
            control,
            traps,
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

    /// The current mode of command connections (the mode of all connections unless
    /// [`set_mode_for`](Self::set_mode_for) set another for subscription connections).
    pub fn mode(&self) -> ProxyMode {
        self.control.borrow().command
    }

    /// The current mode of the connections of `kind`.
    pub fn mode_for(&self, kind: ConnKind) -> ProxyMode {
        self.control.borrow().mode(kind)
    }

    /// Switches the mode for all current and future connections, of both kinds. Takes effect
    /// before any byte read afterwards is forwarded; a connection cut by [`ProxyMode::Cut`]
    /// stays closed when the mode changes back.
    pub fn set_mode(&self, mode: ProxyMode) {
        self.control.send_modify(|control| {
            control.command = mode;
            control.subscription = mode;
            control.spare_caught = false;
        });
    }

    /// [`set_mode`](Self::set_mode) for every connection but those a trap caught
    /// ([`hold_next_sending`](Self::hold_next_sending)), held now or released since: they
    /// go on as if the mode were [`ProxyMode::Pass`] (a held one is still held until
    /// [`release_held`](Self::release_held) or [`cut_held`](Self::cut_held)), until the next
    /// `set_mode`. A call held past its client's timeout while the rest of the network is
    /// cut ([`ProxyMode::Cut`]): its client can reach the server by no other connection, and
    /// the held call still reaches it when released.
    pub fn set_mode_sparing_caught(&self, mode: ProxyMode) {
        self.control.send_modify(|control| {
            control.command = mode;
            control.subscription = mode;
            control.spare_caught = true;
        });
    }

    /// Switches the mode for the current and future connections of one [`ConnKind`] only, as
    /// [`set_mode`](Self::set_mode) does for all; the other kind keeps its mode.
    pub fn set_mode_for(&self, kind: ConnKind, mode: ProxyMode) {
        self.control.send_modify(|control| match kind {
            ConnKind::Command => control.command = mode,
            ConnKind::Subscription => control.subscription = mode,
        });
    }

    /// Arms a trap for one connection: the next connection (open now or later, and not held
    /// by an earlier trap now) whose client sends bytes containing `pattern` is held from
    /// that chunk on, in the direction(s) `held` names, until
    /// [`release_held`](Self::release_held) delivers what it held, in order, or
    /// [`cut_held`](Self::cut_held) closes it. Every other connection keeps the proxy's
    /// modes; a connection whose held bytes were delivered can be caught again. Replaces a
    /// trap armed before that caught nothing. The pattern is looked for within each chunk the
    /// client sends, together with the end of the chunk before it (one byte less than the
    /// pattern), so a pattern split across two reads is found, and one found in a chunk is
    /// not found again in the next.
    ///
    /// A request held past its client's timeout plays a call that failed but may still be
    /// applied ([`Held::Requests`], then release); one whose reply is held and then cut plays
    /// a call applied whose answer never came ([`Held::Replies`], then cut).
    ///
    /// ```no_run
    /// use leasehold_testkit::servers::{Held, RedisServer, TcpProxy};
    ///
    /// # async fn demo() {
    /// let redis = RedisServer::start().await;
    /// let proxy = TcpProxy::start(redis.addr()).await;
    /// proxy.hold_next_sending(b"INCR", Held::Requests);
    /// // ... a client's INCR through the proxy times out; nothing has reached the server ...
    /// proxy.release_held(); // now it does, after its client gave up
    /// # }
    /// ```
    ///
    /// # Panics
    /// If `pattern` is empty.
    pub fn hold_next_sending(&self, pattern: &[u8], held: Held) {
        self.hold_nth_sending(pattern, 1, held);
    }

    /// As [`hold_next_sending`](Self::hold_next_sending), but lets the first `nth - 1` chunks
    /// that clients send with `pattern` in them through (on any connection), and holds the
    /// connection that sends the `nth`: a call that comes after others of the same lock (a
    /// contender's look at the queue after it entered it), where the first such call would
    /// be the wrong one. `nth` 0 counts as 1.
    ///
    /// # Panics
    /// If `pattern` is empty.
    pub fn hold_nth_sending(&self, pattern: &[u8], nth: usize, held: Held) {
        assert!(!pattern.is_empty(), "a trap needs a pattern to look for");
        let mut traps = self.traps();
        traps.last += 1;
        traps.armed = Some(Trap {
            id: traps.last,
            pattern: pattern.into(),
            held,
            skip: nth.saturating_sub(1),
        });
    }

    /// How many connections traps have caught since the proxy started (held now, or
    /// released or cut since).
    pub fn caught(&self) -> usize {
        self.traps().caught
    }

    /// Waits until a trap caught its connection, up to `within`; whether one did.
    pub async fn wait_caught(&self, at_least: usize, within: Duration) -> bool {
        let until = Instant::now() + within;
        while self.caught() < at_least {
            if Instant::now() >= until {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        true
    }

    /// Delivers, in order, everything the connections caught so far held, and holds nothing
    /// more of them; disarms a trap that caught nothing.
    pub fn release_held(&self) {
        let last = {
            let mut traps = self.traps();
            traps.armed = None;
            traps.last
        };
        self.control.send_modify(|c| c.released = last);
    }

    /// Closes the connections caught so far, dropping what they held; disarms a trap that
    /// caught nothing.
    pub fn cut_held(&self) {
        let last = {
            let mut traps = self.traps();
            traps.armed = None;
            traps.last
        };
        self.control.send_modify(|c| c.cut = last);
    }

    fn traps(&self) -> std::sync::MutexGuard<'_, Traps> {
        self.traps.lock().unwrap_or_else(|p| p.into_inner())
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
    traps: Arc<Mutex<Traps>>,
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
        // Every connection starts as a command one: nothing has been sent on it yet.
        if control.borrow().severs(ConnKind::Command) {
            drop(client);
            continue;
        }
        tokio::spawn(relay(client, target, control.clone(), traps.clone()));
    }
}

/// Carries one client connection until either side closes, its kind's mode becomes `Cut` (or,
/// caught by a trap, it is cut), or the proxy stops; dropping the sockets then closes both
/// sides.
async fn relay(
    client: TcpStream,
    target: SocketAddr,
    mut control: watch::Receiver<Control>,
    traps: Arc<Mutex<Traps>>,
) {
    let server = tokio::select! {
        biased;
        _ = control.wait_for(|c| c.severs(ConnKind::Command)) => return,
        server = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(target)) => match server {
            Ok(Ok(server)) => server,
            _ => return,
        },
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (from_client, to_client) = client.into_split();
    let (from_server, to_server) = server.into_split();
    // The upstream reader sniffs the client's commands and tells everyone else the kind, and
    // whether a trap caught the connection.
    let (kind_tx, kind) = watch::channel(ConnKind::Command);
    let (caught_tx, caught) = watch::channel(None);
    let upstream = pipe(
        from_client,
        to_server,
        Link::new(control.clone(), kind.clone(), caught.clone(), true)
            .classifying(kind_tx, caught_tx, traps),
    );
    let downstream = pipe(
        from_server,
        to_client,
        Link::new(control.clone(), kind.clone(), caught.clone(), false),
    );
    let both_ways = async { tokio::join!(upstream, downstream) };
    let mut link = Link::new(control, kind, caught, false);
    tokio::select! {
        biased;
        _ = link.wait_severed() => {}
        _ = both_ways => {}
    }
}

/// What the upstream side alone knows of: the client's commands, and the traps they spring.
struct Classifier {
    kind: watch::Sender<ConnKind>,
    caught: watch::Sender<Option<Trap>>,
    traps: Arc<Mutex<Traps>>,
}

/// One side's view of the proxy's modes and of its connection's kind.
#[derive(Clone)]
struct Link {
    control: watch::Receiver<Control>,
    kind: watch::Receiver<ConnKind>,
    /// The trap that caught this connection, if one did.
    caught: watch::Receiver<Option<Trap>>,
    /// Client to server.
    upstream: bool,
    /// Held by the upstream side only, which sees the client's commands.
    classify: Option<Arc<Classifier>>,
}

impl Link {
    fn new(
        control: watch::Receiver<Control>,
        kind: watch::Receiver<ConnKind>,
        caught: watch::Receiver<Option<Trap>>,
        upstream: bool,
    ) -> Self {
        Link {
            control,
            kind,
            caught,
            upstream,
            classify: None,
        }
    }

    fn classifying(
        mut self,
        kind: watch::Sender<ConnKind>,
        caught: watch::Sender<Option<Trap>>,
        traps: Arc<Mutex<Traps>>,
    ) -> Self {
        self.classify = Some(Arc::new(Classifier {
            kind,
            caught,
            traps,
        }));
        self
    }

    /// The mode that applies to this connection now.
    fn mode(&self) -> ProxyMode {
        if self.spared() {
            return ProxyMode::Pass;
        }
        self.control.borrow().mode(*self.kind.borrow())
    }

    /// Whether the modes leave this connection alone: a trap caught it, and the modes were
    /// set sparing such connections.
    fn spared(&self) -> bool {
        self.control.borrow().spare_caught && self.caught.borrow().is_some()
    }

    /// Whether a trap's hold keeps this side's bytes now.
    fn trapped(&self) -> bool {
        let caught = self.caught.borrow();
        caught.as_ref().is_some_and(|trap| {
            trap.held.covers(self.upstream) && self.control.borrow().holds(trap.id)
        })
    }

    /// Whether this connection was caught by a trap that has been cut.
    fn cut(&self) -> bool {
        let caught = self.caught.borrow();
        caught
            .as_ref()
            .is_some_and(|trap| self.control.borrow().cut >= trap.id)
    }

    /// Returns once the connection must be closed: its kind's mode is `Cut` (and does not spare
    /// it), it was caught by a trap that was cut, or the proxy stopped.
    async fn wait_severed(&mut self) {
        loop {
            let kind = *self.kind.borrow_and_update();
            self.caught.borrow_and_update();
            let severs = self.control.borrow_and_update().severs(kind);
            let stopped = self.control.borrow().stopped;
            if (severs && (stopped || !self.spared())) || self.cut() {
                return;
            }
            tokio::select! {
                changed = self.control.changed() => if changed.is_err() { return },
                // The classifier is gone only with the connection; the control decides then.
                changed = self.kind.changed() => if changed.is_err() {
                    let _ = self.control.changed().await;
                },
                changed = self.caught.changed() => if changed.is_err() {
                    let _ = self.control.changed().await;
                },
            }
        }
    }
}

/// Bytes read from one side, and when they may be written to the other.
struct Chunk {
    bytes: Vec<u8>,
    release_at: Instant,
}

/// Copies one direction: a reader that timestamps chunks as they arrive (and, upstream, sniffs
/// the client's commands), and a writer that holds each until its time has come and the mode is
/// not `Stall`. The queue between them is unbounded, which is fine for the few bytes a test
/// sends.
async fn pipe(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, link: Link) {
    let (queue, mut queued) = mpsc::unbounded_channel::<Chunk>();
    let reading = link.clone();
    let read = async move {
        let mut sniffer = reading.classify.as_ref().map(|_| Sniffer::default());
        let mut buf = vec![0; 16 * 1024];
        // The end of the last chunk and this one, for a trap's pattern split across reads.
        let mut window: Vec<u8> = Vec::new();
        // Ok(0) is end of stream; dropping `queue` then lets the writer half-close.
        while let Ok(n @ 1..) = from.read(&mut buf).await {
            if let (Some(sniffer), Some(classify)) = (sniffer.as_mut(), &reading.classify) {
                if sniffer.feed(&buf[..n]) {
                    // Before this chunk is queued: the SUBSCRIBE itself goes under the
                    // subscription mode.
                    classify.kind.send_replace(ConnKind::Subscription);
                }
            }
            if let Some(classify) = &reading.classify {
                // A connection whose held bytes were delivered may be caught again by a
                // later trap (another call of the same client); one that holds, or was cut,
                // may not.
                let catchable = classify
                    .caught
                    .borrow()
                    .as_ref()
                    .is_none_or(|trap| !reading.control.borrow().holds(trap.id));
                if catchable {
                    window.extend_from_slice(&buf[..n]);
                    let mut traps = classify.traps.lock().unwrap_or_else(|p| p.into_inner());
                    // A pattern split across two reads needs at most all but one of its bytes
                    // from the first: keeping a whole one would find it again in the next.
                    let keep = traps
                        .armed
                        .as_ref()
                        .map_or(0, |t| t.pattern.len().saturating_sub(1));
                    if let Some(trap) = traps.spring(&window) {
                        // Before this chunk is queued: the matching request is held too.
                        classify.caught.send_replace(Some(trap));
                    }
                    drop(traps);
                    let cut = window.len().saturating_sub(keep);
                    window.drain(..cut);
                }
            }
            let delay = match reading.mode() {
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
        let mut link = link;
        while let Some(chunk) = queued.recv().await {
            if hold(&chunk, &mut link).await.is_err() || to.write_all(&chunk.bytes).await.is_err() {
                return;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(read, write);
}

/// Waits until `chunk` may be forwarded; an error once the proxy is gone, or the connection
/// was caught by a trap and cut.
async fn hold(chunk: &Chunk, link: &mut Link) -> io::Result<()> {
    let gone = |_| io::Error::from(io::ErrorKind::BrokenPipe);
    loop {
        link.kind.borrow_and_update();
        link.control.borrow_and_update();
        link.caught.borrow_and_update();
        let mode = link.mode();
        if link.cut() {
            return Err(io::Error::from(io::ErrorKind::BrokenPipe));
        }
        if link.trapped() {
            tokio::select! {
                changed = link.control.changed() => changed.map_err(gone)?,
                changed = link.caught.changed() => if changed.is_err() {
                    link.control.changed().await.map_err(gone)?;
                },
            }
        } else if mode == ProxyMode::Stall {
            tokio::select! {
                changed = link.control.changed() => changed.map_err(gone)?,
                // A connection that turns into a subscription one changes mode with it.
                changed = link.kind.changed() => if changed.is_err() {
                    link.control.changed().await.map_err(gone)?;
                },
                // A trap may catch it meanwhile.
                changed = link.caught.changed() => if changed.is_err() {
                    link.control.changed().await.map_err(gone)?;
                },
            }
        } else if Instant::now() < chunk.release_at {
            tokio::select! {
                _ = tokio::time::sleep_until(chunk.release_at) => {}
                changed = link.control.changed() => changed.map_err(gone)?,
            }
        } else {
            return Ok(());
        }
    }
}

/// Finds out, from the bytes a client sends, whether it subscribes: parses RESP arrays of bulk
/// strings and inline commands, looking at each command's name only.
#[derive(Default)]
struct Sniffer {
    pending: Vec<u8>,
    read: usize,
    gave_up: bool,
}

impl Sniffer {
    /// Takes the next bytes from the client; `true` once a subscribing command was seen.
    fn feed(&mut self, bytes: &[u8]) -> bool {
        if self.gave_up {
            return false;
        }
        self.read += bytes.len();
        self.pending.extend_from_slice(bytes);
        loop {
            match next_command(&self.pending) {
                Parsed::Command { name, used } => {
                    let subscribes = ["SUBSCRIBE", "SSUBSCRIBE", "PSUBSCRIBE"]
                        .iter()
                        .any(|s| s.as_bytes().eq_ignore_ascii_case(name));
                    if subscribes {
                        self.gave_up = true;
                        self.pending = Vec::new();
                        return true;
                    }
                    self.pending.drain(..used);
                }
                Parsed::Incomplete => break,
                Parsed::Garbage => {
                    self.gave_up = true;
                    break;
                }
            }
        }
        if self.read > SNIFF_LIMIT {
            // A command connection that talks a lot: stop paying for the parse.
            self.gave_up = true;
            self.pending = Vec::new();
        }
        false
    }
}

enum Parsed<'a> {
    Command { name: &'a [u8], used: usize },
    Incomplete,
    Garbage,
}

/// The name of the first command in `buf`, and how many bytes the whole command takes.
fn next_command(buf: &[u8]) -> Parsed<'_> {
    let Some(line_end) = find_crlf(buf, 0) else {
        return Parsed::Incomplete;
    };
    if buf.first() != Some(&b'*') {
        // An inline command: `NAME args...\r\n`.
        let line = &buf[..line_end];
        let name = line.split(|b| *b == b' ').next().unwrap_or_default();
        return Parsed::Command {
            name,
            used: line_end + 2,
        };
    }
    let Some(args) = number(&buf[1..line_end]) else {
        return Parsed::Garbage;
    };
    let mut at = line_end + 2;
    let mut name: &[u8] = &[];
    for i in 0..args {
        let Some(len_end) = find_crlf(buf, at) else {
            return Parsed::Incomplete;
        };
        if buf.get(at) != Some(&b'$') {
            return Parsed::Garbage;
        }
        let Some(len) = number(&buf[at + 1..len_end]) else {
            return Parsed::Garbage;
        };
        let start = len_end + 2;
        let end = start + len;
        if buf.len() < end + 2 {
            return Parsed::Incomplete;
        }
        if i == 0 {
            name = &buf[start..end];
        }
        at = end + 2;
    }
    Parsed::Command { name, used: at }
}

fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    buf.get(from..)?
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|i| from + i)
}

fn number(digits: &[u8]) -> Option<usize> {
    std::str::from_utf8(digits).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::{Held, Sniffer, Trap, Traps};

    #[test]
    fn a_trap_for_the_nth_chunk_lets_the_ones_before_through() {
        let mut traps = Traps {
            armed: Some(Trap {
                id: 1,
                pattern: b"{k0}".as_slice().into(),
                held: Held::Requests,
                skip: 1,
            }),
            ..Traps::default()
        };
        assert!(traps.spring(b"GET other").is_none());
        assert!(
            traps.spring(b"GET lock:{k0}").is_none(),
            "the first is let through"
        );
        assert!(
            traps.spring(b"DEL lock:{k0}").is_some(),
            "the second springs it"
        );
        assert_eq!(traps.caught, 1);
        assert!(
            traps.spring(b"GET lock:{k0}").is_none(),
            "one connection per trap"
        );
    }

    #[test]
    fn a_subscribe_is_found_across_chunks_and_after_other_commands() {
        let mut sniffer = Sniffer::default();
        let hello = b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n";
        assert!(!sniffer.feed(hello));
        let subscribe = b"*2\r\n$9\r\nsubscribe\r\n$7\r\nchannel\r\n";
        assert!(!sniffer.feed(&subscribe[..10]));
        assert!(sniffer.feed(&subscribe[10..]));
    }

    #[test]
    fn commands_that_mention_subscribe_as_an_argument_are_not_subscriptions() {
        let mut sniffer = Sniffer::default();
        let publish = b"*3\r\n$7\r\nPUBLISH\r\n$9\r\nSUBSCRIBE\r\n$1\r\nx\r\n";
        assert!(!sniffer.feed(publish));
        assert!(!sniffer.feed(b"PING\r\n"));
        assert!(sniffer.feed(b"ssubscribe x\r\n"));
    }
}
