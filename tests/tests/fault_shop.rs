//! Scenario 6 of RELIABILITY.md, oversell under faults: the shop demo's two servers
//! (`shop-axum` and `shop-actix`, separate processes) sell one sku under load from many
//! clients, while one shop process is paused past its lease (scenario 1) and Redis is frozen.
//! Sold never exceeds the stock, every sale is in the record (`quantity + sold == stock`),
//! sold equals the stock when the load ran to sold out, and order ids are unique.
//!
//! The shops keep their stock in the same Redis as their locks, so an empty restart of that
//! Redis (scenario 3) would erase the stock itself: that phase waits for a separate
//! `--store-url` (RELIABILITY.md, finding 5); the test says so when the shops lack it.
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
use tokio::time::{sleep, Instant};

/// The shops' lease (`lease = "10s"` in their handlers).
const SHOP_LEASE: Duration = Duration::from_secs(10);

/// A shop process; killed on drop.
struct Shop {
    child: Child,
    addr: SocketAddr,
}

impl Shop {
    fn start(binary: &str, args: &[String]) -> Shop {
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

    fn signal(&self, sig: libc::c_int) {
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
async fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
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

/// Which shop answered the latest sale, and when.
type LastSale = Arc<Mutex<Option<(usize, Instant)>>>;

/// `clients` tasks buy `sku` from the shops in turn until it is sold out (or `limit` passes).
async fn buy_until_sold_out(
    shops: &[SocketAddr],
    sku: &str,
    clients: usize,
    limit: Duration,
    last_sale: LastSale,
) -> Outcome {
    let outcome = Arc::new(Mutex::new(Outcome::default()));
    let deadline = Instant::now() + limit;
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (shops, sku, outcome) = (shops.to_vec(), sku.to_owned(), outcome.clone());
        let last_sale = last_sale.clone();
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
                        *last_sale.lock().unwrap() = Some((index, Instant::now()));
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
                    _ => o.other.push((status, body)),
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    Arc::try_unwrap(outcome).unwrap().into_inner().unwrap()
}

async fn set_stock(shop: SocketAddr, sku: &str, quantity: i64) {
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

/// The invariants of one phase; `all_sold`: the load ran until sold out. Records the figures
/// as the history checker's reports do: requests as acquires, sales as holds, purchases
/// refused as stale as losses, oversold items as stale writes accepted.
fn check(phase: &str, stock_set: i64, (left, sold): (i64, i64), o: &Outcome, all_sold: bool) {
    let requests = o.created + o.sold_out + o.busy + o.lost + o.unavailable + o.other.len();
    let mut figures = Report {
        workers: 2,
        acquires: requests,
        holds: o.created,
        losses: o.lost,
        stale_accepted: (sold - stock_set).max(0) as usize,
        faults: usize::from(!phase.contains("no fault")),
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
fn runs() -> usize {
    std::env::var("LEASEHOLD_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s6_no_oversell_when_a_shop_is_paused_past_its_lease_and_redis_freezes() {
    for round in 0..runs() {
        shop_run(round).await;
    }
}

async fn shop_run(round: usize) {
    let redis = RedisServer::start().await;
    let url = vec!["--redis-url".to_owned(), redis.url()];
    let axum = Shop::start("shop-axum", &url);
    let actix = Shop::start("shop-actix", &url);
    let shops = [axum.addr, actix.addr];
    let all = [&axum, &actix];
    let stock_set = 300;
    let clients = 24;

    // No fault: exactly the stock is sold.
    set_stock(shops[0], "calm", stock_set).await;
    let o = buy_until_sold_out(
        &shops,
        "calm",
        clients,
        Duration::from_secs(60),
        LastSale::default(),
    )
    .await;
    check(
        &format!("no fault#{round}"),
        stock_set,
        stock(shops[1], "calm").await,
        &o,
        true,
    );
    assert_eq!(o.created as i64, stock_set, "every sale answered 201");

    // A shop frozen past its lease while it holds the lock (it answered the latest sale a
    // moment ago, and hands the lock to its own waiters for a while): the other shop takes
    // over when the lease ends; the frozen one's purchase, resumed, is refused by the fenced
    // stock record or cancelled as lost (503 lock_lost). Once more if the pause missed.
    let mut hits = 0;
    for (attempt, sku) in ["paused-1", "paused-2"].into_iter().enumerate() {
        if attempt > 0 && hits > 0 {
            break;
        }
        set_stock(shops[0], sku, stock_set).await;
        let last_sale = LastSale::default();
        let load = {
            let (shops, last_sale) = (shops.to_vec(), last_sale.clone());
            let sku = sku.to_owned();
            tokio::spawn(async move {
                buy_until_sold_out(&shops, &sku, clients, Duration::from_secs(90), last_sale).await
            })
        };
        let victim = &all[attempt];
        let aim_until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < aim_until {
            let last = *last_sale.lock().unwrap();
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
            stock_set,
            stock(shops[1], sku).await,
            &o,
            true,
        );
        hits += o.lost;
    }
    eprintln!("6-shop: {hits} purchase(s) of a paused shop refused as stale");

    // Redis frozen for a moment under load: calls fail or wait, nothing oversells.
    set_stock(shops[0], "frozen", stock_set).await;
    let load = {
        let shops = shops.to_vec();
        tokio::spawn(async move {
            buy_until_sold_out(
                &shops,
                "frozen",
                clients,
                Duration::from_secs(60),
                LastSale::default(),
            )
            .await
        })
    };
    sleep(Duration::from_millis(300)).await;
    redis.pause();
    sleep(Duration::from_millis(1500)).await;
    redis.resume();
    let o = load.await.unwrap();
    check(
        &format!("redis frozen#{round}"),
        stock_set,
        stock(shops[1], "frozen").await,
        &o,
        true,
    );

    // Scenario 3 needs the stock apart from the locks.
    let help = Command::new(cargo_bin("shop-axum"))
        .arg("--help")
        .output()
        .expect("shop-axum --help");
    let help =
        String::from_utf8_lossy(&help.stdout).into_owned() + &String::from_utf8_lossy(&help.stderr);
    if !help.contains("--store-url") {
        eprintln!(
            "6-shop: the shops keep stock and locks in one Redis (no --store-url): the \
             empty-restart part of scenario 6 is not run"
        );
    }
}
