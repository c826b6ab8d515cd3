//! Scenario 6 of RELIABILITY.md, oversell under faults: the shop demo's two servers
//! (`shop-axum` and `shop-actix`, separate processes) sell one sku under load from many
//! clients, while one shop process is paused past its lease (scenario 1), Redis is frozen, and
//! (with the stock on a Redis of its own, `--store-url`) the lock server is killed and
//! restarted empty (scenario 3). Sold never exceeds the stock, every sale is in the record
//! (`quantity + sold == stock`), sold equals the stock when the load ran to sold out, order
//! ids are unique, and every answer is one the shops may give under faults.
//!
//! Needs the shop binaries built with the test's profile (`cargo test --workspace` does;
//! else `cargo build -p leasehold-examples --bins`).

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use leasehold_tests::harness::{cargo_bin, RedisServer};
use leasehold_tests::history::Report;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio::time::{sleep, Instant};

/// The shops' lease (`lease = "10s"` in their handlers).
pub(crate) const SHOP_LEASE: Duration = Duration::from_secs(10);
/// The stock every phase sells.
const STOCK: i64 = 300;
/// The clients buying at once, through both shops.
const CLIENTS: usize = 24;
/// How often the lock server is restarted empty in its phase.
const LOCK_RESTARTS: usize = 3;

/// A shop process; killed on drop.
pub(crate) struct Shop {
    child: Child,
    pub(crate) addr: SocketAddr,
}

impl Shop {
    pub(crate) fn start(binary: &str, args: &[String]) -> Shop {
        let mut child = Command::new(cargo_bin(binary))
            .args(["--port", "0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {binary}: {e}"));
        let stdout = child.stdout.take().expect("piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("{binary} did not say where it listens"));
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("{binary} said {line:?}"));
        Shop { child, addr }
    }

    /// Its exit status, once it exited within `bound`.
    pub(crate) async fn exited_within(
        &mut self,
        bound: Duration,
    ) -> Option<std::process::ExitStatus> {
        let until = Instant::now() + bound;
        while Instant::now() < until {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            sleep(Duration::from_millis(20)).await;
        }
        None
    }

    pub(crate) fn signal(&self, sig: libc::c_int) {
        // SAFETY: a plain syscall on our own child, which is not reaped before drop.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, sig);
        }
    }
}

impl Drop for Shop {
    fn drop(&mut self) {
        self.signal(libc::SIGCONT);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 request on a connection of its own: `(status, body)`.
pub(crate) async fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    let exchange = async {
        let mut stream = TcpStream::connect(addr).await?;
        let request = format!(
            "{method} {path} HTTP/1.1\r\nhost: shop\r\ncontent-type: application/json\r\n\
             content-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await?;
        let mut response = Vec::new();
        stream.read_to_end(&mut response).await?;
        Ok::<_, std::io::Error>(String::from_utf8_lossy(&response).into_owned())
    };
    match tokio::time::timeout(Duration::from_secs(60), exchange).await {
        Ok(Ok(text)) => {
            let status = text
                .split(' ')
                .nth(1)
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            let body = text
                .split_once("\r\n\r\n")
                .map(|(_, b)| b.to_owned())
                .unwrap_or_default();
            (status, body)
        }
        Ok(Err(_)) => (0, String::new()),
        Err(_) => panic!("{method} {path} on {addr} did not answer within 60 s"),
    }
}

/// A JSON field's raw value, for the few flat bodies the shop answers with.
fn field<'a>(body: &'a str, name: &str) -> Option<&'a str> {
    let start = body.find(&format!("\"{name}\":"))? + name.len() + 3;
    let rest = body[start..].trim_start();
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    Some(rest[..end].trim().trim_matches('"'))
}

/// What the clients saw.
#[derive(Default, Debug)]
struct Outcome {
    created: usize,
    sold_out: usize,
    busy: usize,
    lost: usize,
    unavailable: usize,
    other: Vec<(u16, String)>,
    order_ids: Vec<String>,
    slowest: Duration,
}

/// The sales so far, as the clients saw them: how many, and which shop answered the latest
/// one, when. Fault injections aim with it.
#[derive(Default, Debug)]
struct Sales {
    count: usize,
    last: Option<(usize, Instant)>,
}

type SalesLog = Arc<Mutex<Sales>>;

/// [`CLIENTS`] tasks buy `sku` from the shops in turn until it is sold out (or `limit` passes).
async fn buy_until_sold_out(
    shops: &[SocketAddr],
    sku: &str,
    limit: Duration,
    sales: SalesLog,
) -> Outcome {
    let outcome = Arc::new(Mutex::new(Outcome::default()));
    let deadline = Instant::now() + limit;
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let (shops, sku, outcome) = (shops.to_vec(), sku.to_owned(), outcome.clone());
        let sales = sales.clone();
        tasks.push(tokio::spawn(async move {
            let mut n = c;
            while Instant::now() < deadline {
                n += 1;
                let index = n % shops.len();
                let shop = shops[index];
                let start = Instant::now();
                let (status, body) = http(shop, "POST", &format!("/orders/{sku}"), "").await;
                let took = start.elapsed();
                let mut o = outcome.lock().unwrap();
                o.slowest = o.slowest.max(took);
                match (status, field(&body, "error")) {
                    (201, _) => {
                        let mut sales = sales.lock().unwrap();
                        sales.count += 1;
                        sales.last = Some((index, Instant::now()));
                        o.created += 1;
                        o.order_ids
                            .push(field(&body, "order_id").unwrap_or("?").to_owned());
                    }
                    (409, Some("sold_out")) => {
                        o.sold_out += 1;
                        return;
                    }
                    (409, Some("lock_busy")) => o.busy += 1,
                    (503, Some("lock_lost")) => o.lost += 1,
                    // 408: actix's request-head timeout, for a request that reached a frozen
                    // shop; like a 503 or a dropped connection, it was never served.
                    (503, _) | (408, _) | (0, _) => o.unavailable += 1,
                    // Fails the phase: this client stops, so the load ends soon if all see it.
                    _ => {
                        o.other.push((status, body));
                        return;
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    Arc::try_unwrap(outcome).unwrap().into_inner().unwrap()
}

/// [`buy_until_sold_out`] in a task of its own, for a phase that injects a fault meanwhile.
fn spawn_load(
    shops: &[SocketAddr],
    sku: &str,
    limit: Duration,
    sales: SalesLog,
) -> JoinHandle<Outcome> {
    let (shops, sku) = (shops.to_vec(), sku.to_owned());
    tokio::spawn(async move { buy_until_sold_out(&shops, &sku, limit, sales).await })
}

pub(crate) async fn set_stock(shop: SocketAddr, sku: &str, quantity: i64) {
    let (status, body) = http(
        shop,
        "PUT",
        &format!("/stock/{sku}"),
        &format!("{{\"quantity\":{quantity}}}"),
    )
    .await;
    assert_eq!(status, 200, "PUT /stock/{sku}: {body}");
}

async fn stock(shop: SocketAddr, sku: &str) -> (i64, i64) {
    let (status, body) = http(shop, "GET", &format!("/stock/{sku}"), "").await;
    assert_eq!(status, 200, "GET /stock/{sku}: {body}");
    let n = |f| field(&body, f).and_then(|v| v.parse().ok()).expect(f);
    (n("quantity"), n("sold"))
}

/// The invariants of one phase; `all_sold`: the load ran until sold out; `faults`: how many
/// were injected. Records the figures as the history checker's reports do: requests as
/// acquires, sales as holds, purchases refused as stale as losses, oversold items as stale
/// writes accepted.
fn check(
    phase: &str,
    stock_set: i64,
    (left, sold): (i64, i64),
    o: &Outcome,
    all_sold: bool,
    faults: usize,
) {
    let requests = o.created + o.sold_out + o.busy + o.lost + o.unavailable + o.other.len();
    let mut figures = Report {
        workers: 2,
        acquires: requests,
        holds: o.created,
        losses: o.lost,
        stale_accepted: (sold - stock_set).max(0) as usize,
        faults,
        ..Report::default()
    };
    figures.max_acquire_ns = o.slowest.as_nanos() as u64;
    figures.record(&format!("6-shop {phase}"));
    eprintln!(
        "6-shop {phase}: stock {stock_set}, sold {sold}, left {left}, clients saw {o:?}",
        o = Summary(o)
    );
    assert!(
        sold <= stock_set,
        "{phase}: oversold, {sold} of {stock_set}"
    );
    assert_eq!(left + sold, stock_set, "{phase}: a sale overwrote another");
    assert!(o.created as i64 <= sold, "{phase}: more 201s than sales");
    let unique: HashSet<&String> = o.order_ids.iter().collect();
    assert_eq!(
        unique.len(),
        o.order_ids.len(),
        "{phase}: an order id came twice"
    );
    assert!(
        o.other.is_empty(),
        "{phase}: unexpected answers {:?}",
        o.other
    );
    if all_sold {
        assert_eq!(
            sold, stock_set,
            "{phase}: the load ran to sold out, yet {sold} sold"
        );
    }
}

struct Summary<'a>(&'a Outcome);

impl std::fmt::Debug for Summary<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let o = self.0;
        write!(
            f,
            "201 {}, 409 sold_out {}, 409 busy {}, 503 lost {}, 503/unreachable {}, slowest {:?}",
            o.created, o.sold_out, o.busy, o.lost, o.unavailable, o.slowest
        )
    }
}

/// How many times the scenario repeats: `LEASEHOLD_RUNS` (default 1).
pub(crate) fn runs() -> usize {
    std::env::var("LEASEHOLD_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s6_no_oversell_when_a_shop_pauses_redis_freezes_or_the_lock_redis_restarts_empty() {
    for round in 0..runs() {
        one_redis_run(round).await;
        lock_server_restart_run(round).await;
    }
}

/// The demo's setup, locks and stock on one Redis: no fault, a shop paused past its lease,
/// Redis frozen.
async fn one_redis_run(round: usize) {
    let redis = RedisServer::start().await;
    let url = vec!["--redis-url".to_owned(), redis.url()];
    let axum = Shop::start("shop-axum", &url);
    let actix = Shop::start("shop-actix", &url);
    let shops = [axum.addr, actix.addr];
    let all = [&axum, &actix];

    // No fault: exactly the stock is sold.
    set_stock(shops[0], "calm", STOCK).await;
    let o = buy_until_sold_out(&shops, "calm", Duration::from_secs(60), SalesLog::default()).await;
    check(
        &format!("no fault#{round}"),
        STOCK,
        stock(shops[1], "calm").await,
        &o,
        true,
        0,
    );
    assert_eq!(o.created as i64, STOCK, "every sale answered 201");

    // A shop frozen past its lease while it holds the lock (it answered the latest sale a
    // moment ago, and hands the lock to its own waiters for a while): the other shop takes
    // over when the lease ends; the frozen one's purchase, resumed, is refused by the fenced
    // stock record or cancelled as lost (503 lock_lost). Once more if the pause missed.
    let mut hits = 0;
    for (attempt, sku) in ["paused-1", "paused-2"].into_iter().enumerate() {
        if attempt > 0 && hits > 0 {
            break;
        }
        set_stock(shops[0], sku, STOCK).await;
        let sales = SalesLog::default();
        let load = spawn_load(&shops, sku, Duration::from_secs(90), sales.clone());
        let victim = &all[attempt];
        let aim_until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < aim_until {
            let last = sales.lock().unwrap().last;
            if last.is_some_and(|(shop, at)| {
                shop == attempt && at.elapsed() < Duration::from_millis(2)
            }) {
                break;
            }
            tokio::task::yield_now().await;
        }
        victim.signal(libc::SIGSTOP);
        sleep(SHOP_LEASE + Duration::from_secs(2)).await;
        victim.signal(libc::SIGCONT);
        let o = load.await.unwrap();
        check(
            &format!("shop {attempt} paused#{round}"),
            STOCK,
            stock(shops[1], sku).await,
            &o,
            true,
            1,
        );
        hits += o.lost;
    }
    eprintln!("6-shop: {hits} purchase(s) of a paused shop refused as stale");

    // Redis frozen for a moment under load: calls fail or wait, nothing oversells.
    set_stock(shops[0], "frozen", STOCK).await;
    let load = spawn_load(
        &shops,
        "frozen",
        Duration::from_secs(60),
        SalesLog::default(),
    );
    sleep(Duration::from_millis(300)).await;
    redis.pause();
    sleep(Duration::from_millis(1500)).await;
    redis.resume();
    let o = load.await.unwrap();
    check(
        &format!("redis frozen#{round}"),
        STOCK,
        stock(shops[1], "frozen").await,
        &o,
        true,
        1,
    );
}

/// Scenario 3 on the shops' lock server: the locks on one Redis, the stock and the order
/// counter on another (`--store-url`). Under load, the lock server is killed (SIGKILL) and
/// started again empty on the same port 150 ms later (a crash and a supervisor's restart),
/// [`LOCK_RESTARTS`] times, each once another share of the stock has sold, so purchases are
/// in flight at every kill and the shops must recover in between. Leases end with the lock
/// server's connection; a purchase whose lease ended is cancelled, or its write refused by the
/// fenced stock record (503 `lock_lost`); the fences handed out after a restart are re-seeded
/// from the server clock, so they exceed every fence the stock record saw before.
async fn lock_server_restart_run(round: usize) {
    let mut servers = RedisServer::start_many(2).await;
    let store = servers.pop().expect("two servers");
    let locks = servers.pop().expect("two servers");
    let args = vec![
        "--redis-url".to_owned(),
        locks.url(),
        "--store-url".to_owned(),
        store.url(),
    ];
    let axum = Shop::start("shop-axum", &args);
    let actix = Shop::start("shop-actix", &args);
    let shops = [axum.addr, actix.addr];

    set_stock(shops[0], "restarted", STOCK).await;
    let sales = SalesLog::default();
    let load = spawn_load(&shops, "restarted", Duration::from_secs(90), sales.clone());
    let mut restarts = 0;
    'restarts: for restart in 1..=LOCK_RESTARTS {
        // A quarter of the stock more sold: the shops recovered from the restart before.
        let target = STOCK as usize * restart / (LOCK_RESTARTS + 1);
        while sales.lock().unwrap().count < target {
            if load.is_finished() {
                // Short of the stock: the check below says why.
                break 'restarts;
            }
            sleep(Duration::from_millis(1)).await;
        }
        locks.kill9();
        let sold = sales.lock().unwrap().count;
        sleep(Duration::from_millis(150)).await;
        locks.restart().await;
        restarts += 1;
        eprintln!("6-shop: lock server killed after {sold} sales and restarted empty");
    }
    let o = load.await.unwrap();
    check(
        &format!("lock redis restarted#{round}"),
        STOCK,
        stock(shops[1], "restarted").await,
        &o,
        true,
        restarts,
    );
    assert_eq!(
        restarts, LOCK_RESTARTS,
        "the load ended before every restart"
    );
}
