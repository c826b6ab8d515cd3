//! Scenario 6 of RELIABILITY.md with a holder's write delayed in the network past its lease,
//! on the demo's shops under load from ApacheBench (`ab`, Debian's apache2-utils): three shop
//! processes (`shop-axum` and `shop-actix`) sell one sku, their locks on one Redis, the stock
//! and the order counter on another (`--store-url`), each shop's stock connection behind a
//! proxy of its own, and one shop's lock connection too. The test holds that shop's next
//! purchase write on its way to the stock (its proxy holds what the connection sends, from the
//! write on) and stalls its lock connection, so its lease runs out with the write on the wire.
//! Another shop takes the lock and reads the stock; its write is held too, at its own proxy.
//! Then the delayed write is delivered, and once the stock server has run it, the next
//! holder's write: the delayed write lands between the next holder's read and its write, the
//! window a fence on the write alone leaves open. The proxies order the steps, so the write
//! lands in that window in every run; no sleep does.
//!
//! With the shops' purchase, whose read claims the stock record with the lock's fence, the
//! delayed write is refused: `quantity + sold == stock`, sold ≤ stock, one order number per
//! sale, sold == stock once sold out. With the purchase before issue 44 (`--fence-write-only`:
//! a plain read, only the write fenced) the delayed write is accepted, and so is the next
//! holder's, computed from a read that did not see it: one sale lost, `quantity + sold ==
//! stock + 1`, sold == stock + 1 at sold out. The second test shows that, so the first cannot
//! pass because the fault missed its window.
//!
//! Needs `ab` (`scripts/ensure-tools ab:apache2-utils`, which `scripts/test` runs) and the shop
//! binaries built with the test's profile (`cargo build -p leasehold-examples --bins`).

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use leasehold_tests::harness::{Held, ProxyMode, RedisServer, TcpProxy};
use leasehold_tests::history::Report;
use tokio::process::{Child, Command};
use tokio::time::{sleep, Instant};

use crate::shop::{http, runs, set_stock, Shop, SHOP_LEASE};

/// The stock each run sells.
const STOCK: i64 = 60;
/// `ab -n` per shop: the two shops whose writes are not delayed alone ask for twice the stock.
const AB_REQUESTS: usize = 60;
/// `ab -c` per shop: the delayed shop's other purchases queue behind its holder.
const AB_CONCURRENCY: usize = 4;
/// What a purchase's write sends and its read, its claim and a restock do not: the order
/// counter, the write's second key.
const PURCHASE_WRITE: &[u8] = b"shop:orders";
/// The counter that numbers orders (`leasehold_examples::store::ORDERS_KEY`).
const ORDERS_KEY: &str = "shop:orders";
const SKU: &str = "delayed";

/// Which purchase the shops run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Purchase {
    /// The shops' own: the read claims the record, the write needs the claim.
    Claimed,
    /// `--fence-write-only`: the purchase before issue 44.
    FenceWriteOnly,
}

/// What the stock server and `ab` saw of one run.
#[derive(Debug)]
struct Outcome {
    quantity: i64,
    sold: i64,
    /// Order numbers handed out during the load.
    orders: i64,
    /// 2xx answers (the purchase's 201), over all shops.
    created: usize,
    /// Whether the delayed write sold: `sold` went up when the stock server ran it.
    delayed_sold: bool,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s6_shops_hold_when_a_holders_write_is_delayed_past_its_lease() {
    for round in 0..runs() {
        for victim in ["shop-axum", "shop-actix"] {
            let o = delayed_write_run(victim, Purchase::Claimed, round).await;
            if let Err(broken) = judge(&o) {
                panic!("{victim}'s write delayed past its lease: {broken}; {o:?}");
            }
            assert!(!o.delayed_sold, "the delayed write was accepted: {o:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s6_fencing_the_write_alone_loses_a_sale_when_a_write_is_delayed() {
    let o = delayed_write_run("shop-axum", Purchase::FenceWriteOnly, 0).await;
    let broken = judge(&o).expect_err(
        "the purchase that fences its write alone held: the delayed write missed the window \
         between the next holder's read and its write",
    );
    eprintln!("6-shop delayed write, --fence-write-only, as expected: {broken}");
    assert!(o.delayed_sold, "the delayed write was refused: {o:?}");
    assert_eq!(
        o.quantity + o.sold,
        STOCK + 1,
        "the delayed write's sale, and only it, is lost: {o:?}"
    );
}

/// The rules of scenario 6 on the store's final record; the first one broken.
fn judge(o: &Outcome) -> Result<(), String> {
    let Outcome {
        quantity,
        sold,
        orders,
        created,
        ..
    } = *o;
    if quantity + sold != STOCK {
        return Err(format!(
            "a sale was lost: quantity {quantity} + sold {sold} != stock {STOCK}"
        ));
    }
    if sold > STOCK {
        return Err(format!("oversold: {sold} of {STOCK}"));
    }
    if orders != sold {
        return Err(format!("{orders} order numbers for {sold} sales"));
    }
    if created as i64 > sold {
        return Err(format!("{created} answers 201 for {sold} sales"));
    }
    if quantity != 0 {
        return Err(format!(
            "the load ended with {quantity} left: it must sell out"
        ));
    }
    Ok(())
}

/// One run: three shops, the first one's (`victim`'s) write delayed past its lease.
async fn delayed_write_run(victim: &str, purchase: Purchase, round: usize) -> Outcome {
    let mut servers = RedisServer::start_many(2).await;
    let store = servers.pop().expect("two servers");
    let locks = servers.pop().expect("two servers");
    let victim_locks = TcpProxy::start(locks.addr()).await;
    let other = if victim == "shop-axum" {
        "shop-actix"
    } else {
        "shop-axum"
    };
    let mut stock_proxies = Vec::new();
    let mut shops = Vec::new();
    for (i, binary) in [victim, other, victim].into_iter().enumerate() {
        let stock_proxy = TcpProxy::start(store.addr()).await;
        let lock_url = match i {
            0 => victim_locks.url(),
            _ => locks.url(),
        };
        let mut args = vec![
            "--redis-url".to_owned(),
            lock_url,
            "--store-url".to_owned(),
            stock_proxy.url(),
        ];
        if purchase == Purchase::FenceWriteOnly {
            args.push("--fence-write-only".to_owned());
        }
        shops.push(Shop::start(binary, &args));
        stock_proxies.push(stock_proxy);
    }
    let addrs: Vec<SocketAddr> = shops.iter().map(|s| s.addr).collect();

    // Every script the purchase runs is in the stock server's cache before a write is held:
    // a held write whose script went missing would be run as nothing.
    set_stock(addrs[0], SKU, STOCK).await;
    for addr in &addrs {
        let (status, body) = http(*addr, "POST", &format!("/orders/{SKU}"), "").await;
        assert_eq!(status, 201, "a purchase before the load: {body}");
    }
    set_stock(addrs[1], SKU, STOCK).await;
    let mut conn = store.conn().await;
    let orders_before = counter(&mut conn).await;

    stock_proxies[0].hold_next_sending(PURCHASE_WRITE, Held::Requests);
    let load: Vec<Child> = addrs.iter().map(|addr| ab(*addr)).collect();

    // The victim's next write is held on its way, and its lock connection stalls: its lease
    // runs out with the write on the wire, and its renewals and release do not arrive.
    assert!(
        stock_proxies[0]
            .wait_caught(1, Duration::from_secs(60))
            .await,
        "{victim} wrote no purchase within 60 s under ab"
    );
    victim_locks.set_mode(ProxyMode::Stall);
    for proxy in &stock_proxies[1..] {
        proxy.hold_next_sending(PURCHASE_WRITE, Held::Requests);
    }
    // Once the lease ran out in the lock server, another shop takes the lock, reads (claims)
    // the stock, and sends its write, which its proxy holds: it keeps the lock meanwhile.
    let until = Instant::now() + SHOP_LEASE + Duration::from_secs(60);
    let next = loop {
        if let Some(next) = (1..stock_proxies.len()).find(|&i| stock_proxies[i].caught() > 0) {
            break next;
        }
        assert!(
            Instant::now() < until,
            "no other shop wrote within the lease and 60 s after {victim}'s write was held"
        );
        sleep(Duration::from_millis(5)).await;
    };
    // The other traps caught nothing: disarmed.
    for (i, proxy) in stock_proxies.iter().enumerate().skip(1) {
        if i != next {
            proxy.release_held();
        }
    }
    // The delayed write lands, between the next holder's read and its write: the stock
    // server runs no other script meanwhile (every other purchase waits for the lock).
    let scripts_run = evalsha_calls(&mut conn).await;
    let sold_before = sold(&mut conn).await;
    stock_proxies[0].release_held();
    let until = Instant::now() + Duration::from_secs(10);
    while evalsha_calls(&mut conn).await == scripts_run {
        assert!(
            Instant::now() < until,
            "the stock server did not run {victim}'s delayed write within 10 s of its release"
        );
        sleep(Duration::from_millis(2)).await;
    }
    let delayed_sold = sold(&mut conn).await > sold_before;
    stock_proxies[next].release_held();
    victim_locks.set_mode(ProxyMode::Pass);

    let (mut created, mut requests) = (0, 0);
    for (child, addr) in load.into_iter().zip(&addrs) {
        let (ok, all) = ab_answers(child, *addr).await;
        created += ok;
        requests += all;
    }
    let (quantity, sold): (i64, i64) = redis::cmd("HMGET")
        .arg(format!("shop:stock:{SKU}"))
        .arg("quantity")
        .arg("sold")
        .query_async(&mut conn)
        .await
        .expect("the stock record");
    let o = Outcome {
        quantity,
        sold,
        orders: counter(&mut conn).await - orders_before,
        created,
        delayed_sold,
    };
    let label = match purchase {
        Purchase::Claimed => "claimed",
        Purchase::FenceWriteOnly => "write fenced only",
    };
    Report {
        workers: shops.len(),
        acquires: requests,
        holds: created,
        stale_accepted: (o.quantity + o.sold - STOCK).max(0) as usize,
        faults: 1,
        ..Report::default()
    }
    .record(&format!("6-shop {victim} write delayed, {label}#{round}"));
    eprintln!(
        "6-shop {victim} write delayed past its lease, {label}: the delayed write {}; stock \
         {STOCK}, sold {sold}, left {quantity}, {} order numbers, {created} of {requests} \
         answered 201 (ab)",
        if delayed_sold { "sold" } else { "was refused" },
        o.orders
    );
    o
}

/// `ab` buying the sku from the shop at `addr`: `-r` keeps it going past a failed request,
/// `-l` takes answers of different lengths (order ids), `-s` outlasts a purchase that waits
/// out the lock (30 s) and then the stock (5 s).
fn ab(addr: SocketAddr) -> Child {
    let (n, c) = (AB_REQUESTS.to_string(), AB_CONCURRENCY.to_string());
    let url = format!("http://{addr}/orders/{SKU}");
    Command::new("ab")
        .args(["-q", "-l", "-r", "-s", "120", "-n", &n, "-c", &c])
        .args(["-p", "/dev/null", "-T", "application/json", &url])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run ab ({e}): install Debian's apache2-utils \
                 (scripts/ensure-tools ab:apache2-utils; scripts/test does)"
            )
        })
}

/// 2xx answers and requests of a finished `ab`.
async fn ab_answers(child: Child, addr: SocketAddr) -> (usize, usize) {
    let output = tokio::time::timeout(Duration::from_secs(300), child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("ab against {addr} did not finish within 300 s"))
        .expect("ab's output");
    let text = String::from_utf8_lossy(&output.stdout);
    let number = |label: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(label))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse::<usize>().ok())
    };
    let complete = number("Complete requests:").unwrap_or_else(|| {
        panic!(
            "ab against {addr} did not finish: {text}{}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    let failed = number("Failed requests:").unwrap_or(0);
    let non_2xx = number("Non-2xx responses:").unwrap_or(0);
    (complete.saturating_sub(failed + non_2xx), complete)
}

/// The sales in the stock record.
async fn sold(conn: &mut redis::aio::MultiplexedConnection) -> i64 {
    let n: Option<i64> = redis::cmd("HGET")
        .arg(format!("shop:stock:{SKU}"))
        .arg("sold")
        .query_async(conn)
        .await
        .expect("the stock record");
    n.unwrap_or(0)
}

/// The order counter.
async fn counter(conn: &mut redis::aio::MultiplexedConnection) -> i64 {
    let n: Option<i64> = redis::cmd("GET")
        .arg(ORDERS_KEY)
        .query_async(conn)
        .await
        .expect("the order counter");
    n.unwrap_or(0)
}

/// How many scripts the server ran by `EVALSHA` (refused ones included).
async fn evalsha_calls(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .expect("INFO commandstats");
    info.lines()
        .find_map(|line| line.strip_prefix("cmdstat_evalsha:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}
