//! The oversell demo: many concurrent purchases of a stock of 100, through four independent
//! clients, with and without `leasehold`. Without the lock the naive read-check-write sells
//! more than there is; with it, exactly the stock.
//!
//! Starts a throwaway `redis-server` unless `REDIS_URL` is set. (The HTTP shop version of this
//! demo, with several server processes, comes with the web integration.)

use std::time::{Duration, Instant};

use leasehold::Locker;
use leasehold_tests::harness::RedisServer;
use redis::AsyncCommands;

const STOCK: i64 = 100;
const PURCHASES: usize = 1000;
const CLIENTS: usize = 4;

struct Outcome {
    sold: i64,
    elapsed: Duration,
}

async fn run(url: &str, sku: &str, lockers: Option<&[Locker]>) -> Outcome {
    let client = redis::Client::open(url).expect("REDIS_URL is a redis:// URL");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let stock_key = format!("demo:stock:{sku}");
    let sold_key = format!("demo:sold:{sku}");
    let _: () = conn.set(&stock_key, STOCK).await.unwrap();
    let _: () = conn.set(&sold_key, 0).await.unwrap();
    let start = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..PURCHASES {
        let mut conn = conn.clone();
        let (stock_key, sold_key) = (stock_key.clone(), sold_key.clone());
        let locker = lockers.map(|l| l[i % l.len()].clone());
        let sku = sku.to_owned();
        tasks.push(tokio::spawn(async move {
            let guard = match &locker {
                Some(l) => match l.lock(format!("stock:{sku}")).acquire().await {
                    Ok(g) => Some(g),
                    Err(e) => {
                        eprintln!("purchase refused: {e}");
                        return;
                    }
                },
                None => None,
            };
            // The naive read-check-write that the lock must protect; the sleep stands for
            // the I/O a real handler does between reading and writing.
            let stock: i64 = conn.get(&stock_key).await.unwrap();
            if stock > 0 {
                tokio::time::sleep(Duration::from_millis(1)).await;
                let _: () = conn.set(&stock_key, stock - 1).await.unwrap();
                let _: () = conn.incr(&sold_key, 1).await.unwrap();
            }
            if let Some(g) = guard {
                g.release().await.expect("release");
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let sold: i64 = conn.get(&sold_key).await.unwrap();
    Outcome {
        sold,
        elapsed: start.elapsed(),
    }
}

#[tokio::main]
async fn main() {
    let (_server, url) = match std::env::var("REDIS_URL") {
        Ok(url) => (None, url),
        Err(_) => {
            eprintln!("REDIS_URL is not set: starting a throwaway redis-server");
            let server = RedisServer::start().await;
            let url = server.url();
            (Some(server), url)
        }
    };
    let mut lockers = Vec::new();
    for _ in 0..CLIENTS {
        let locker = Locker::builder()
            .url(url.as_str())
            .prefix("demo")
            .default_wait(Duration::from_secs(30))
            .build()
            .await
            .unwrap_or_else(|e| {
                eprintln!("error: {e}");
                std::process::exit(1)
            });
        lockers.push(locker);
    }
    println!("{PURCHASES} concurrent purchases of a stock of {STOCK}, through {CLIENTS} clients\n");
    eprintln!("running without the lock...");
    let naive = run(&url, "naive", None).await;
    eprintln!("running with leasehold...");
    let locked = run(&url, "locked", Some(&lockers)).await;
    println!(
        "{:<14} {:>6} {:>9} {:>10}",
        "run", "sold", "oversold", "time"
    );
    for (name, o) in [("no lock", &naive), ("leasehold", &locked)] {
        println!(
            "{:<14} {:>6} {:>9} {:>8.0}ms",
            name,
            o.sold,
            (o.sold - STOCK).max(0),
            o.elapsed.as_secs_f64() * 1000.0
        );
    }
    if locked.sold != STOCK {
        eprintln!("\nFAILED: the locked run sold {} of {STOCK}", locked.sold);
        std::process::exit(1);
    }
    println!("\nwith the lock: sold == stock, oversold == 0");
}
