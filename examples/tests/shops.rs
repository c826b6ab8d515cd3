//! HTTP-level tests of both shop binaries, run as processes against a throwaway Redis (or
//! PostgreSQL, for `--postgres`): statuses and bodies of the API, lock errors with
//! `Retry-After`, fencing, `--no-lock`.
//! Every test is bounded by a timeout, and every shop dies with the test that started it.

use std::future::Future;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use leasehold::Locker;
use leasehold_examples::client::{HttpClient, Reply};
use leasehold_examples::store::{stock_key, ORDERS_KEY};
use leasehold_tests::harness::{EtcdServer, PgServer, RedisServer};
use serde_json::json;

const SHOPS: [&str; 2] = [
    env!("CARGO_BIN_EXE_shop-actix"),
    env!("CARGO_BIN_EXE_shop-axum"),
];

async fn bounded<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(60), f)
        .await
        .expect("the test did not finish within 60s")
}

/// A shop process, killed when dropped.
struct Shop {
    child: Child,
    url: String,
    name: String,
}

impl Drop for Shop {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Shop {
    /// The command that runs `binary` on a free port (returned too), locking on `redis_url`.
    fn command(binary: &str, redis_url: &str, args: &[&str]) -> (Command, u16) {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let mut cmd = Command::new(binary);
        cmd.args(["--port", &port.to_string(), "--redis-url", redis_url])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        die_with_test(&mut cmd);
        (cmd, port)
    }

    async fn start(binary: &str, redis_url: &str, args: &[&str]) -> Shop {
        let (mut cmd, port) = Shop::command(binary, redis_url, args);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {binary}: {e}"));
        let shop = Shop {
            child,
            url: format!("http://127.0.0.1:{port}"),
            name: binary.rsplit('/').next().unwrap_or(binary).to_owned(),
        };
        let client = HttpClient::new(Duration::from_secs(2));
        let deadline = Instant::now() + Duration::from_secs(20);
        while client.get(&shop.url("/stock/probe")).await.is_err() {
            assert!(
                Instant::now() < deadline,
                "{} did not answer within 20s",
                shop.name
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        shop
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }
}

/// The kernel kills the shop when the test's thread ends, even if the test binary is killed.
fn die_with_test(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs between fork and exec and makes only async-signal-safe calls.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

fn client() -> HttpClient {
    HttpClient::new(Duration::from_secs(20))
}

/// Sets the stock of `sku` through the shop's API; the shop must accept it.
async fn restock(http: &HttpClient, shop: &Shop, sku: &str, quantity: i64) {
    let r = http
        .put_json(
            &shop.url(&format!("/stock/{sku}")),
            &json!({ "quantity": quantity }),
        )
        .await
        .unwrap();
    assert_eq!(r.status, 200, "PUT /stock/{sku}: {}", r.body);
}

fn assert_error(reply: &Reply, status: u16, code: &str) {
    assert_eq!(reply.status, status, "{}", reply.body);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert_eq!(reply.json(), json!({ "error": code }), "{}", reply.body);
}

#[tokio::test]
async fn both_shops_serve_the_stock_api() {
    bounded(async {
        let redis = RedisServer::start().await;
        let http = client();
        for binary in SHOPS {
            let shop = Shop::start(binary, &redis.url(), &[]).await;
            let sku = format!("sku-{}", shop.name);

            let r = http
                .put_json(
                    &shop.url(&format!("/stock/{sku}")),
                    &json!({ "quantity": 2 }),
                )
                .await
                .unwrap();
            assert_eq!(r.status, 200, "{}", r.body);
            assert_eq!(r.json(), json!({ "sku": sku, "quantity": 2, "sold": 0 }));

            let r = http.get(&shop.url(&format!("/stock/{sku}"))).await.unwrap();
            assert_eq!(r.status, 200);
            assert_eq!(r.json(), json!({ "sku": sku, "quantity": 2, "sold": 0 }));

            let mut fences = Vec::new();
            for _ in 0..2 {
                let r = http
                    .post(&shop.url(&format!("/orders/{sku}")))
                    .await
                    .unwrap();
                assert_eq!(r.status, 201, "{}", r.body);
                let order = r.json();
                assert_eq!(order["sku"], json!(sku));
                assert!(order["order_id"].as_str().is_some_and(|id| !id.is_empty()));
                fences.push(order["fence"].as_u64().unwrap());
            }
            assert!(fences[0] > 0 && fences[1] > fences[0], "fences {fences:?}");

            let r = http
                .post(&shop.url(&format!("/orders/{sku}")))
                .await
                .unwrap();
            assert_error(&r, 409, "sold_out");
            let r = http.get(&shop.url(&format!("/stock/{sku}"))).await.unwrap();
            assert_eq!(r.json(), json!({ "sku": sku, "quantity": 0, "sold": 2 }));

            let r = http.get(&shop.url("/stock/never-set")).await.unwrap();
            assert_error(&r, 404, "unknown_sku");
            let r = http.post(&shop.url("/orders/never-set")).await.unwrap();
            assert_error(&r, 404, "unknown_sku");
            let r = http
                .put_json(
                    &shop.url(&format!("/stock/{sku}")),
                    &json!({ "quantity": -1 }),
                )
                .await
                .unwrap();
            assert_error(&r, 400, "invalid_quantity");
            let r = http
                .put_json(&shop.url(&format!("/stock/{sku}")), &json!({ "qty": 1 }))
                .await
                .unwrap();
            assert!((400..500).contains(&r.status), "{} {}", r.status, r.body);
        }
    })
    .await;
}

#[tokio::test]
async fn the_two_shops_share_one_stock_and_one_fence_sequence() {
    bounded(async {
        let redis = RedisServer::start().await;
        let http = client();
        let actix = Shop::start(SHOPS[0], &redis.url(), &[]).await;
        let axum = Shop::start(SHOPS[1], &redis.url(), &[]).await;
        restock(&http, &actix, "shared", 5).await;
        let mut last = 0;
        for shop in [&axum, &actix, &axum] {
            let r = http.post(&shop.url("/orders/shared")).await.unwrap();
            assert_eq!(r.status, 201, "{}", r.body);
            let fence = r.json()["fence"].as_u64().unwrap();
            assert!(fence > last, "fences increase across processes");
            last = fence;
        }
        let r = http.get(&actix.url("/stock/shared")).await.unwrap();
        assert_eq!(
            r.json(),
            json!({ "sku": "shared", "quantity": 2, "sold": 3 })
        );
    })
    .await;
}

#[tokio::test]
async fn a_busy_lock_is_409_with_retry_after() {
    bounded(async {
        let redis = RedisServer::start().await;
        let http = client();
        // Another process holds the stock's lock, with the shops' prefix.
        let other = Locker::builder()
            .url(redis.url())
            .prefix("shop")
            .build()
            .await
            .unwrap();
        for binary in SHOPS {
            let shop = Shop::start(binary, &redis.url(), &["--lock-wait", "200ms"]).await;
            let sku = format!("busy-{}", shop.name);
            restock(&http, &shop, &sku, 3).await;
            let holder = other
                .lock(format!("stock:{sku}"))
                .lease(Duration::from_secs(5))
                .acquire()
                .await
                .unwrap();
            let r = http
                .post(&shop.url(&format!("/orders/{sku}")))
                .await
                .unwrap();
            assert_error(&r, 409, "lock_busy");
            let secs: u64 = r
                .header("retry-after")
                .expect("Retry-After")
                .parse()
                .unwrap();
            assert!((1..=5).contains(&secs), "Retry-After {secs}");
            assert!(!r.body.contains(&sku), "the key never shows");
            holder.release().await.unwrap();
            let r = http
                .post(&shop.url(&format!("/orders/{sku}")))
                .await
                .unwrap();
            assert_eq!(r.status, 201, "{}", r.body);
        }
    })
    .await;
}

#[tokio::test]
async fn a_write_with_a_stale_fence_is_refused() {
    bounded(async {
        let redis = RedisServer::start().await;
        let http = client();
        let mut conn = redis.conn().await;
        for binary in SHOPS {
            let shop = Shop::start(binary, &redis.url(), &[]).await;
            let sku = format!("fenced-{}", shop.name);
            restock(&http, &shop, &sku, 3).await;
            // A holder with a newer fence wrote last (as after this shop's lease was lost).
            let _: () = redis::cmd("HSET")
                .arg(stock_key(&sku))
                .arg("fence")
                .arg(9_000_000_000_000_000u64)
                .query_async(&mut conn)
                .await
                .unwrap();
            let r = http
                .post(&shop.url(&format!("/orders/{sku}")))
                .await
                .unwrap();
            assert_error(&r, 503, "lock_lost");
            let r = http.get(&shop.url(&format!("/stock/{sku}"))).await.unwrap();
            assert_eq!(r.json()["sold"], json!(0), "nothing was written");
        }
    })
    .await;
}

#[tokio::test]
async fn an_unreachable_redis_is_503_with_retry_after() {
    bounded(async {
        let http = client();
        for binary in SHOPS {
            let redis = RedisServer::start().await;
            // A purchase rides the outage out for its whole wait (2 s here), then answers.
            let shop = Shop::start(binary, &redis.url(), &["--lock-wait", "2s"]).await;
            restock(&http, &shop, "down", 3).await;
            redis.kill9();
            let r = http.post(&shop.url("/orders/down")).await.unwrap();
            assert_error(&r, 503, "lock_unavailable");
            assert_eq!(r.header("retry-after"), Some("1"));
            assert!(!r.body.contains("127.0.0.1"), "no Redis detail");
        }
    })
    .await;
}

/// `GET /ready` reads the locker's state: 200 while the lock engine answers, 503 while it is
/// out (here its Redis was killed: the lock connection dropped, the engine's session is lost,
/// with no request made), 200 again once it is back (the locker's probe notices).
#[tokio::test]
async fn ready_is_503_while_the_lock_engine_is_out() {
    bounded(async {
        let http = client();
        for binary in SHOPS {
            let redis = RedisServer::start().await;
            let shop = Shop::start(binary, &redis.url(), &[]).await;
            let ready = shop.url("/ready");
            let r = http.get(&ready).await.unwrap();
            assert_eq!(r.status, 200, "{}: {}", shop.name, r.body);
            assert_eq!(r.json(), json!({ "engine": "connected" }));

            redis.kill9();
            let r = until_status(&http, &ready, 503).await;
            assert_eq!(r.json(), json!({ "engine": "lost" }), "{}", shop.name);
            redis.restart().await;
            let r = until_status(&http, &ready, 200).await;
            assert_eq!(
                r.json(),
                json!({ "engine": "reconnected" }),
                "{}",
                shop.name
            );
        }
    })
    .await;
}

/// Polls `url` until it answers `status` (bounded by the test's timeout).
async fn until_status(http: &HttpClient, url: &str, status: u16) -> Reply {
    loop {
        let r = http.get(url).await.unwrap();
        if r.status == status {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `--raw-lock`, the web benchmark's floor, is a real lock: concurrent purchases of one sku
/// never oversell, each sale carries a fence of its own, and no key of leasehold's is used.
#[tokio::test]
async fn a_lock_by_hand_keeps_concurrent_purchases_from_overselling() {
    bounded(async {
        let redis = RedisServer::start().await;
        let http = client();
        for binary in SHOPS {
            let shop = Shop::start(binary, &redis.url(), &["--raw-lock"]).await;
            let sku = format!("raw-{}", shop.name);
            restock(&http, &shop, &sku, 5).await;
            let mut buys = tokio::task::JoinSet::new();
            for _ in 0..20 {
                let (http, url) = (http.clone(), shop.url(&format!("/orders/{sku}")));
                buys.spawn(async move { http.post(&url).await });
            }
            let mut fences: Vec<u64> = Vec::new();
            let mut sold_out = 0;
            while let Some(r) = buys.join_next().await {
                let r = r.unwrap().unwrap();
                match r.status {
                    201 => fences.push(r.json()["fence"].as_u64().unwrap()),
                    409 => {
                        assert_error(&r, 409, "sold_out");
                        sold_out += 1;
                    }
                    other => panic!("{other}: {}", r.body),
                }
            }
            assert_eq!((fences.len(), sold_out), (5, 15), "fences {fences:?}");
            assert!(fences.iter().all(|f| *f > 0));
            let mut distinct = fences.clone();
            distinct.sort_unstable();
            distinct.dedup();
            assert_eq!(distinct.len(), fences.len(), "fences {fences:?}");
            let r = http.get(&shop.url(&format!("/stock/{sku}"))).await.unwrap();
            assert_eq!(r.json(), json!({ "sku": sku, "quantity": 0, "sold": 5 }));
            assert!(
                redis.keys("shop:lock:*").await.is_empty(),
                "leasehold took no lock"
            );
            assert!(
                redis.keys("rawshop:lock:*").await.is_empty(),
                "every lock by hand was given back"
            );
        }
    })
    .await;
}

#[tokio::test]
async fn without_the_lock_orders_carry_no_fence() {
    bounded(async {
        let redis = RedisServer::start().await;
        let http = client();
        for binary in SHOPS {
            let shop = Shop::start(binary, &redis.url(), &["--no-lock"]).await;
            restock(&http, &shop, "plain", 1).await;
            let r = http.post(&shop.url("/orders/plain")).await.unwrap();
            assert_eq!(r.status, 201, "{}", r.body);
            assert_eq!(r.json()["fence"], json!(0));
            assert!(
                redis.keys("shop:lock:*").await.is_empty(),
                "no lock was taken"
            );
        }
    })
    .await;
}

#[tokio::test]
async fn the_axum_shop_exposes_leasehold_metrics_for_prometheus() {
    bounded(async {
        let redis = RedisServer::start().await;
        let http = client();
        let shop = Shop::start(SHOPS[1], &redis.url(), &[]).await;
        restock(&http, &shop, "m-1", 1).await;
        assert_eq!(
            http.post(&shop.url("/orders/m-1")).await.unwrap().status,
            201
        );
        let r = http.get(&shop.url("/metrics")).await.unwrap();
        assert_eq!(r.status, 200);
        // Two locked handlers ran (restock and buy): two acquisitions, nothing held now.
        assert!(r.body.contains("leasehold_acquired_total 2"), "{}", r.body);
        assert!(r.body.contains("leasehold_locks_held 0"), "{}", r.body);
        // Histograms with buckets, as the Grafana dashboard's percentiles need.
        assert!(
            r.body.contains("leasehold_acquire_seconds_bucket{"),
            "{}",
            r.body
        );
        assert!(
            r.body
                .contains(r#"leasehold_engine_state{engine="redis",state="connected"} 1"#),
            "{}",
            r.body
        );
    })
    .await;
}

#[tokio::test]
async fn store_url_keeps_the_stock_apart_from_the_locks() {
    bounded(async {
        let mut servers = RedisServer::start_many(2).await;
        let store = servers.pop().unwrap();
        let locks = servers.pop().unwrap();
        let http = client();
        for binary in SHOPS {
            let shop = Shop::start(binary, &locks.url(), &["--store-url", &store.url()]).await;
            let sku = format!("apart-{}", shop.name);
            restock(&http, &shop, &sku, 2).await;
            let r = http
                .post(&shop.url(&format!("/orders/{sku}")))
                .await
                .unwrap();
            assert_eq!(r.status, 201, "{}", r.body);

            // The sale is in the store server, with the order counter ...
            let mut conn = store.conn().await;
            let (quantity, sold): (i64, i64) = redis::cmd("HMGET")
                .arg(stock_key(&sku))
                .arg("quantity")
                .arg("sold")
                .query_async(&mut conn)
                .await
                .unwrap();
            assert_eq!((quantity, sold), (1, 1));
            assert_eq!(store.keys(ORDERS_KEY).await, [ORDERS_KEY]);
            assert!(store.keys("shop:lock:*").await.is_empty());
            assert!(store.keys("shop:fence:*").await.is_empty());
            // ... the lock's fence counter in the lock server, and no stock there.
            assert!(locks.keys("shop:stock:*").await.is_empty());
            assert!(locks.keys(ORDERS_KEY).await.is_empty());
            assert_eq!(
                locks.keys("shop:fence:*").await,
                [format!("shop:fence:{{stock:{sku}}}")]
            );

            // An empty restart of the lock server leaves the stock as it was.
            locks.restart().await;
            let r = http.get(&shop.url(&format!("/stock/{sku}"))).await.unwrap();
            assert_eq!(r.json(), json!({ "sku": sku, "quantity": 1, "sold": 1 }));
        }
    })
    .await;
}

#[tokio::test]
async fn a_shop_that_cannot_start_names_the_server_it_could_not_reach() {
    bounded(async {
        let mut servers = RedisServer::start_many(2).await;
        let down = servers.pop().unwrap();
        let up = servers.pop().unwrap();
        down.kill9();
        for binary in SHOPS {
            for (locks, store, named) in [
                (up.url(), down.url(), "the stock store"),
                (down.url(), up.url(), "the lock server"),
            ] {
                let (mut cmd, _) = Shop::command(binary, &locks, &["--store-url", &store]);
                let out = tokio::task::spawn_blocking(move || cmd.output())
                    .await
                    .unwrap()
                    .unwrap();
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert_eq!(out.status.code(), Some(1), "{binary}: {stderr}");
                assert!(
                    stderr.contains(&format!("cannot reach {named} at {}", down.addr())),
                    "{binary}: {stderr}"
                );
            }
        }
    })
    .await;
}

/// Expires every lock of a sku named `stale-...` the moment it is granted, as if its holder
/// had been paused past its lease and another had taken it over: the holder still believes it
/// holds, and only the fence check in the purchase's transaction can tell.
const EXPIRE_STALE_LOCKS: &str = "
CREATE FUNCTION shop_test_expire() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.key LIKE '%stale-%' THEN
        NEW.expires := clock_timestamp() - interval '1 second';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER shop_test_expire BEFORE UPDATE ON leasehold_locks
    FOR EACH ROW EXECUTE FUNCTION shop_test_expire();";

#[tokio::test]
async fn with_postgres_the_stock_lives_next_to_the_locks_and_stale_holders_write_nothing() {
    bounded(async {
        let postgres = PgServer::start().await;
        let http = client();
        // No Redis at all: --redis-url points nowhere, and nothing may need it.
        let nowhere = "redis://127.0.0.1:1";
        let pg = ["--postgres", &postgres.url()];
        let actix = Shop::start(SHOPS[0], nowhere, &pg).await;
        let axum = Shop::start(SHOPS[1], nowhere, &pg).await;
        restock(&http, &actix, "pg-1", 3).await;
        let mut last = 0;
        for shop in [&axum, &actix] {
            let r = http.post(&shop.url("/orders/pg-1")).await.unwrap();
            assert_eq!(r.status, 201, "{}", r.body);
            let fence = r.json()["fence"].as_u64().unwrap();
            assert!(fence > last, "fences increase across processes");
            last = fence;
        }
        let r = http.get(&axum.url("/stock/pg-1")).await.unwrap();
        assert_eq!(r.json(), json!({ "sku": "pg-1", "quantity": 1, "sold": 2 }));
        let rows = postgres
            .execute("SELECT quantity, sold FROM shop_stock WHERE sku = 'pg-1'")
            .await
            .unwrap();
        assert_eq!(rows, [[Some("1".to_owned()), Some("2".to_owned())]]);
        let r = http.get(&actix.url("/stock/never-set")).await.unwrap();
        assert_error(&r, 404, "unknown_sku");

        for shop in [&actix, &axum] {
            restock(&http, shop, &format!("stale-{}", shop.name), 3).await;
        }
        postgres.execute(EXPIRE_STALE_LOCKS).await.unwrap();
        for shop in [&actix, &axum] {
            let sku = format!("stale-{}", shop.name);
            let r = http
                .post(&shop.url(&format!("/orders/{sku}")))
                .await
                .unwrap();
            assert_error(&r, 503, "lock_lost");
            let r = http.get(&shop.url(&format!("/stock/{sku}"))).await.unwrap();
            assert_eq!(r.json()["sold"], json!(0), "nothing was written");
        }

        // --no-lock keeps the stock in PostgreSQL too, and takes no lock.
        let unlocked = Shop::start(SHOPS[1], nowhere, &[pg[0], pg[1], "--no-lock"]).await;
        postgres
            .execute("DELETE FROM leasehold_locks")
            .await
            .unwrap();
        restock(&http, &unlocked, "plain", 1).await;
        let r = http.post(&unlocked.url("/orders/plain")).await.unwrap();
        assert_eq!(r.status, 201, "{}", r.body);
        assert_eq!(r.json()["fence"], json!(0));
        let locks = postgres
            .execute("SELECT count(*) FROM leasehold_locks")
            .await
            .unwrap();
        assert_eq!(locks, [[Some("0".to_owned())]], "no lock was taken");
    })
    .await;
}

/// Reservations on etcd, through both shops at once: the axum shop takes each reservation's
/// locks in one `lock_all`, the actix shop one after another. 24 concurrent reservations of
/// three seats among five, each seat in stock 4 times: each seat is sold exactly once per
/// reservation answered 201 that names it and never more than its stock (a lost update or an
/// oversell would break one of the two), a reservation answered 409 `sold_out` bought
/// nothing, and bad requests are 400 or 404 with nothing bought.
#[tokio::test]
async fn reservations_book_every_seat_or_none_and_never_one_twice() {
    bounded(async {
        let redis = RedisServer::start().await;
        let etcd = EtcdServer::start().await;
        let endpoint = etcd.endpoint();
        let http = client();
        let axum = Shop::start(SHOPS[1], &redis.url(), &["--etcd", &endpoint]).await;
        let actix = Shop::start(
            SHOPS[0],
            &redis.url(),
            &["--etcd", &endpoint, "--reservation-locks", "one-by-one"],
        )
        .await;
        let seats: Vec<String> = (0..5).map(|i| format!("seat-{i}")).collect();
        for seat in &seats {
            restock(&http, &axum, seat, 4).await;
        }
        let asks: Vec<Vec<String>> = (0..24)
            .map(|n| (0..3).map(|k| seats[(n + 2 * k) % 5].clone()).collect())
            .collect();
        let sent: Vec<_> = asks
            .iter()
            .enumerate()
            .map(|(n, ask)| {
                let shop = if n % 2 == 0 { &axum } else { &actix };
                let (http, url) = (http.clone(), shop.url("/reservations/gala"));
                let body = json!({ "seats": ask });
                tokio::spawn(async move { http.post_json(&url, &body).await.unwrap() })
            })
            .collect();
        let mut replies = Vec::new();
        for reply in sent {
            replies.push(reply.await.expect("a reservation's task"));
        }
        let mut booked = std::collections::HashMap::<&str, i64>::new();
        for (ask, r) in asks.iter().zip(&replies) {
            match r.status {
                201 => {
                    let orders = r.json()["orders"].clone();
                    let skus: Vec<&str> = orders
                        .as_array()
                        .expect("orders")
                        .iter()
                        .map(|o| o["sku"].as_str().expect("sku"))
                        .collect();
                    assert_eq!(skus, *ask, "one order per seat, in the order asked");
                    for seat in ask {
                        *booked.entry(seat.as_str()).or_default() += 1;
                    }
                }
                _ => assert_error(r, 409, "sold_out"),
            }
        }
        assert!(
            replies.iter().any(|r| r.status == 201) && replies.iter().any(|r| r.status == 409),
            "some reservations got their seats and some found one sold out"
        );
        for seat in &seats {
            let r = http
                .get(&axum.url(&format!("/stock/{seat}")))
                .await
                .unwrap();
            let sold = r.json()["sold"].as_i64().expect("sold");
            let reserved = booked.get(seat.as_str()).copied().unwrap_or(0);
            assert_eq!(
                sold, reserved,
                "{seat}: sold once per reservation that got it"
            );
            assert!(sold <= 4, "{seat}: sold {sold} of 4");
            assert_eq!(r.json()["quantity"], json!(4 - sold), "{seat}");
        }

        // Bad requests buy nothing.
        restock(&http, &axum, "spare", 1).await;
        for shop in [&axum, &actix] {
            let url = shop.url("/reservations/gala");
            for bad in [json!([]), json!(["spare", "spare"])] {
                let r = http
                    .post_json(&url, &json!({ "seats": bad }))
                    .await
                    .unwrap();
                assert_error(&r, 400, "invalid_seats");
            }
            let r = http
                .post_json(&url, &json!({ "seats": ["spare", "never-set"] }))
                .await
                .unwrap();
            assert_error(&r, 404, "unknown_sku");
        }
        let r = http.get(&axum.url("/stock/spare")).await.unwrap();
        assert_eq!(
            r.json()["sold"],
            json!(0),
            "nothing of a refused reservation was bought"
        );
    })
    .await;
}
