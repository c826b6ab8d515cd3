//! The oversell demo, from nothing to a result table: a throwaway `redis-server` (unless
//! `REDIS_URL` is set, or the engine is PostgreSQL or MySQL), shop processes of both frameworks (separate processes, as separate
//! machines would be), a stock of 100, and 2,000 concurrent purchases spread across them,
//! first with the handlers' `--no-lock` twin, then with `#[distributed_lock]`.
//!
//! `demo [--purchases 2000] [--stock 100] [--concurrency 200] [--shops 2] [--redis-url URL]
//! [--engine redis|zookeeper|etcd|postgres|mysql]`
//!
//! With `--engine zookeeper` the locks live in a throwaway ZooKeeper server the demo starts
//! (the harness's `ZkServer`), with `--engine etcd` in a throwaway etcd (`EtcdServer`); the
//! stock stays in Redis, the shop's data store. With `--engine postgres` the locks and the
//! stock both live in a throwaway PostgreSQL (`PgServer`), each purchase checking its fence in
//! its own transaction, and no Redis is started; with `--engine mysql` the same in a throwaway
//! MariaDB (`MysqlServer`), each purchase checking its fence with
//! `leasehold::mysql::check_fence` in its transaction.
//!
//! Exits non-zero if the locked round sold anything but exactly the stock. Everything it
//! started is stopped when it ends, also on Ctrl-C.

mod fleet;
mod report;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use leasehold_examples::client::HttpClient;
use leasehold_examples::shop::ShopArgs;
use leasehold_tests::harness::{EtcdServer, MysqlServer, PgServer, RedisServer, ZkServer};

use fleet::Fleet;
use report::{Outcome, Round};

/// The demo's command line.
#[derive(Clone, Debug)]
struct Args {
    purchases: usize,
    stock: i64,
    concurrency: usize,
    shops: usize,
    redis_url: Option<String>,
    engine: Engine,
}

/// Where the shops' locks live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Engine {
    /// The Redis of the stock.
    Redis,
    /// A throwaway ZooKeeper server of the demo's own.
    ZooKeeper,
    /// A throwaway etcd server of the demo's own.
    Etcd,
    /// A throwaway PostgreSQL server of the demo's own, for the locks and the stock.
    Postgres,
    /// A throwaway MariaDB server of the demo's own, for the locks and the stock.
    Mysql,
}

impl Engine {
    fn parse(name: &str) -> Result<Engine, String> {
        match name {
            "redis" => Ok(Engine::Redis),
            "zookeeper" => Ok(Engine::ZooKeeper),
            "etcd" => Ok(Engine::Etcd),
            "postgres" => Ok(Engine::Postgres),
            "mysql" => Ok(Engine::Mysql),
            other => Err(format!(
                "--engine {other:?}: expected redis, zookeeper, etcd, postgres or mysql\n\n{USAGE}"
            )),
        }
    }

    /// Where the locks and the stock live, for the heading.
    fn label(self) -> &'static str {
        match self {
            Engine::Redis => "Redis",
            Engine::ZooKeeper => "ZooKeeper, stock in Redis",
            Engine::Etcd => "etcd, stock in Redis",
            Engine::Postgres => "PostgreSQL, stock in PostgreSQL, fenced in the same transaction",
            Engine::Mysql => "MySQL (MariaDB), stock in MySQL, fenced in the same transaction",
        }
    }
}

const USAGE: &str = "\
usage: demo [--purchases 2000] [--stock 100] [--concurrency 200] [--shops 2] [--redis-url URL]
            [--engine redis|zookeeper|etcd|postgres|mysql]

  --purchases N    purchases per round (default 2000)
  --stock N        the stock they compete for (default 100)
  --concurrency N  purchases in flight at once (default 200)
  --shops N        shop processes per round, alternating actix-web and axum (default 2)
  --redis-url URL  use this Redis (default: $REDIS_URL, else a throwaway redis-server)
  --engine E       where the locks live: redis (default), or zookeeper or etcd, a
                   throwaway server of that kind (the stock stays in Redis), or postgres
                   or mysql, a throwaway PostgreSQL or MariaDB holding the locks and the
                   stock (no Redis)";

impl Args {
    fn parse(args: impl IntoIterator<Item = String>) -> Result<Args, String> {
        let mut parsed = Args {
            purchases: 2000,
            stock: 100,
            concurrency: 200,
            shops: 2,
            redis_url: std::env::var("REDIS_URL").ok().filter(|u| !u.is_empty()),
            engine: Engine::Redis,
        };
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((f, v)) => (f.to_owned(), Some(v.to_owned())),
                None => (arg, None),
            };
            if flag == "-h" || flag == "--help" {
                return Err(USAGE.to_owned());
            }
            const FLAGS: [&str; 6] = [
                "--purchases",
                "--stock",
                "--concurrency",
                "--shops",
                "--redis-url",
                "--engine",
            ];
            if !FLAGS.contains(&flag.as_str()) {
                return Err(format!("unknown argument {flag:?}\n\n{USAGE}"));
            }
            let value = inline
                .or_else(|| args.next())
                .ok_or_else(|| format!("{flag} needs a value\n\n{USAGE}"))?;
            let number = |min: usize| {
                value
                    .parse::<usize>()
                    .ok()
                    .filter(|n| *n >= min)
                    .ok_or_else(|| format!("{flag} {value:?}: expected a number >= {min}"))
            };
            match flag.as_str() {
                "--purchases" => parsed.purchases = number(1)?,
                "--stock" => parsed.stock = number(1)? as i64,
                "--concurrency" => parsed.concurrency = number(1)?,
                "--shops" => parsed.shops = number(1)?,
                "--engine" => parsed.engine = Engine::parse(&value)?,
                _ => parsed.redis_url = Some(value),
            }
        }
        Ok(parsed)
    }
}

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.first().map(String::as_str) == Some(fleet::SERVE_FLAG) {
        serve(&argv[1..]);
    }
    let runtime = tokio::runtime::Runtime::new().expect("start the Tokio runtime");
    // Shops are spawned from this (the main) thread, which lives as long as the demo: their
    // parent-death signal is tied to it.
    runtime.block_on(demo(argv));
}

/// `demo --serve shop-actix|shop-axum [shop flags]`: one of the demo's shop processes.
fn serve(argv: &[String]) -> ! {
    let (name, flags) = argv
        .split_first()
        .map_or(("", &[][..]), |(n, f)| (n.as_str(), f));
    let args = ShopArgs::parse(name, flags.iter().cloned()).unwrap_or_else(|message| {
        eprintln!("{message}");
        std::process::exit(2)
    });
    let served = match name {
        "shop-actix" => leasehold_examples::actix_shop::serve(args),
        "shop-axum" => leasehold_examples::axum_shop::serve(args),
        _ => {
            eprintln!(
                "{} takes shop-actix or shop-axum, not {name:?}",
                fleet::SERVE_FLAG
            );
            std::process::exit(2)
        }
    };
    if let Err(e) = served {
        eprintln!("{name}: {e}");
        std::process::exit(1);
    }
    std::process::exit(0)
}

async fn demo(argv: Vec<String>) {
    let args = match Args::parse(argv) {
        Ok(args) => args,
        Err(message) => {
            let help = message == USAGE;
            eprintln!("{message}");
            std::process::exit(if help { 0 } else { 2 });
        }
    };
    let fleet = Fleet::default();
    let logs = std::env::temp_dir().join(format!("leasehold-demo-{}", std::process::id()));
    let code = tokio::select! {
        code = run(&args, &fleet, &logs) => code,
        _ = tokio::signal::ctrl_c() => {
            eprintln!("\ninterrupted: stopping the shops and the servers");
            130
        }
    };
    // The select dropped `run`, and with it the throwaway servers; now the shops.
    fleet.stop_all();
    let _ = std::fs::remove_dir_all(&logs);
    std::process::exit(code);
}

/// The whole demo; the exit code.
async fn run(args: &Args, fleet: &Fleet, logs: &PathBuf) -> i32 {
    let servers = match start_servers(args).await {
        Ok(servers) => servers,
        Err(message) => {
            eprintln!("{message}");
            return 1;
        }
    };
    if let Err(e) = std::fs::create_dir_all(logs) {
        eprintln!("cannot create {}: {e}", logs.display());
        return 1;
    }
    println!(
        "{} purchases of a stock of {}, {} in flight at a time, across {} shop processes per \
         round ({}); locks in {}\n",
        args.purchases,
        args.stock,
        args.concurrency,
        args.shops,
        (0..args.shops)
            .map(|i| fleet::SHOPS[i % fleet::SHOPS.len()])
            .collect::<Vec<_>>()
            .join(", "),
        args.engine.label(),
    );
    let run_id = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis())
    );
    let mut rounds = Vec::new();
    for (name, locked) in [("no lock", false), ("leasehold", true)] {
        let sku = format!("demo-{}-{run_id}", if locked { "locked" } else { "nolock" });
        // Both rounds keep the stock in the same place; the first one takes no lock.
        let mut shop_args: Vec<&str> = servers.shop_args.iter().map(String::as_str).collect();
        if !locked {
            shop_args.push("--no-lock");
        }
        match round(name, &shop_args, &sku, args, fleet, logs).await {
            Ok(round) => rounds.push(round),
            Err(message) => {
                eprintln!("\nerror: {message}");
                return 1;
            }
        }
        fleet.stop_all();
        if let Ok(store) = leasehold_examples::store::Store::connect(&servers.store_url).await {
            let _ = store.remove(&sku).await;
        }
    }
    println!("\n{}", report::table(&rounds));
    let (naive, locked) = (&rounds[0], &rounds[1]);
    if naive.oversold() > 0 {
        println!(
            "without the lock: {} items sold from a stock of {} ({} that did not exist)",
            naive.sold,
            naive.stock,
            naive.oversold()
        );
    } else {
        println!("without the lock: no oversell this time (it is a race: run it again)");
    }
    if locked.sold == locked.stock && locked.oversold() == 0 {
        println!("with leasehold:   sold == {}, oversold == 0", locked.stock);
        0
    } else {
        println!(
            "FAILED: with leasehold {} items were sold from a stock of {}",
            locked.sold, locked.stock
        );
        1
    }
}

/// The servers of one demo run and how the shops reach them. Dropping it stops the
/// throwaway servers.
struct Servers {
    /// Held until the end of the demo: dropping one stops its server.
    _running: Vec<Box<dyn std::any::Any>>,
    /// The flags that point a shop at them (`--redis-url`, `--zookeeper`, `--etcd`,
    /// `--postgres`).
    shop_args: Vec<String>,
    /// Where the stock lives, to remove each round's record at the end.
    store_url: String,
}

/// Starts the throwaway servers `args` ask for: a Redis unless one is given or the engine is
/// PostgreSQL, and the engine's own server.
async fn start_servers(args: &Args) -> Result<Servers, String> {
    let mut running: Vec<Box<dyn std::any::Any>> = Vec::new();
    let mut shop_args = Vec::new();
    if args.engine == Engine::Mysql {
        let mysql = start_mysql().await?;
        let url = mysql.url();
        eprintln!(
            "started a throwaway MariaDB on {} for the locks and the stock",
            mysql.addr()
        );
        running.push(Box::new(mysql));
        shop_args.extend(["--mysql".to_owned(), url.clone()]);
        return Ok(Servers {
            _running: running,
            shop_args,
            store_url: url,
        });
    }
    if args.engine == Engine::Postgres {
        let postgres = start_postgres().await?;
        let url = postgres.url();
        eprintln!(
            "started a throwaway PostgreSQL on {} for the locks and the stock",
            postgres.addr()
        );
        running.push(Box::new(postgres));
        shop_args.extend(["--postgres".to_owned(), url.clone()]);
        return Ok(Servers {
            _running: running,
            shop_args,
            store_url: url,
        });
    }
    let redis_url = match &args.redis_url {
        Some(url) => {
            eprintln!("using the Redis at REDIS_URL / --redis-url");
            url.clone()
        }
        None => {
            redis_server_installed()?;
            let redis = RedisServer::start().await;
            eprintln!("started a throwaway redis-server on {}", redis.addr());
            let url = redis.url();
            running.push(Box::new(redis));
            url
        }
    };
    shop_args.extend(["--redis-url".to_owned(), redis_url.clone()]);
    match args.engine {
        Engine::Redis | Engine::Postgres | Engine::Mysql => {}
        Engine::ZooKeeper => {
            let zookeeper = start_zookeeper().await?;
            let hosts = zookeeper.connect_string();
            eprintln!("started a throwaway ZooKeeper on {hosts} for the locks");
            running.push(Box::new(zookeeper));
            shop_args.extend(["--zookeeper".to_owned(), hosts]);
        }
        Engine::Etcd => {
            let etcd = start_etcd().await?;
            let endpoint = etcd.endpoint();
            eprintln!("started a throwaway etcd on {endpoint} for the locks");
            running.push(Box::new(etcd));
            shop_args.extend(["--etcd".to_owned(), endpoint]);
        }
    }
    Ok(Servers {
        _running: running,
        shop_args,
        store_url: redis_url,
    })
}

/// One round: start the shops, set the stock, buy concurrently, read what was sold.
async fn round(
    name: &'static str,
    shop_args: &[&str],
    sku: &str,
    args: &Args,
    fleet: &Fleet,
    logs: &std::path::Path,
) -> Result<Round, String> {
    eprintln!("[{name}] starting {} shop processes...", args.shops);
    let shops = fleet.start(args.shops, shop_args, logs).await?;
    let client = HttpClient::new(Duration::from_secs(60));
    let reply = client
        .put_json(
            &format!("{}/stock/{sku}", shops[0].url),
            &serde_json::json!({ "quantity": args.stock }),
        )
        .await?;
    if reply.status != 200 {
        return Err(format!(
            "setting the stock answered {}: {}",
            reply.status, reply.body
        ));
    }

    let urls: Arc<Vec<String>> = Arc::new(
        shops
            .iter()
            .map(|s| format!("{}/orders/{sku}", s.url))
            .collect(),
    );
    let next = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..args.concurrency.min(args.purchases) {
        let (client, urls, next, done) = (client.clone(), urls.clone(), next.clone(), done.clone());
        let purchases = args.purchases;
        workers.push(tokio::spawn(async move {
            let mut results = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= purchases {
                    return results;
                }
                let sent = Instant::now();
                let outcome = match client.post(&urls[i % urls.len()]).await {
                    Ok(reply) => Outcome::of(reply.status, reply.error_code().as_deref()),
                    Err(_) => Outcome::Other,
                };
                results.push((outcome, sent.elapsed()));
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let progress = tokio::spawn(show_progress(name, done.clone(), args.purchases));
    let mut results = Vec::with_capacity(args.purchases);
    for worker in workers {
        results.extend(
            worker
                .await
                .map_err(|e| format!("a purchase task failed: {e}"))?,
        );
    }
    let elapsed = start.elapsed();
    progress.abort();
    eprintln!(
        "\r[{name}] {n}/{n} purchases in {:.1}s          ",
        elapsed.as_secs_f64(),
        n = args.purchases
    );

    let reply = client
        .get(&format!("{}/stock/{sku}", shops[shops.len() - 1].url))
        .await?;
    let sold = reply.json()["sold"].as_i64().ok_or_else(|| {
        format!(
            "reading the stock answered {}: {}",
            reply.status, reply.body
        )
    })?;
    Ok(Round {
        name,
        stock: args.stock,
        sold,
        results,
        elapsed,
    })
}

/// Prints how many purchases are answered, in place on a terminal, every second otherwise.
async fn show_progress(name: &str, done: Arc<AtomicUsize>, total: usize) {
    let tty = std::io::stderr().is_terminal();
    let every = if tty {
        Duration::from_millis(100)
    } else {
        Duration::from_secs(1)
    };
    loop {
        tokio::time::sleep(every).await;
        let n = done.load(Ordering::Relaxed);
        if tty {
            eprint!("\r[{name}] {n}/{total} purchases...");
        } else {
            eprintln!("[{name}] {n}/{total} purchases...");
        }
    }
}

/// A throwaway ZooKeeper server from the harness; the error says what to do when it cannot
/// start (the harness's own reason, from its panic, is printed above it).
async fn start_zookeeper() -> Result<ZkServer, String> {
    tokio::spawn(ZkServer::start()).await.map_err(|_| {
        "error: could not start a throwaway ZooKeeper (the reason is above).\n\
         Install it (Debian/Ubuntu: scripts/ensure-zookeeper, or run scripts/demo --engine \
         zookeeper, which does), or run the demo with --engine redis"
            .to_owned()
    })
}

/// A throwaway etcd server from the harness; the error says what to do when it cannot start
/// (the harness's own reason, from its panic, is printed above it).
async fn start_etcd() -> Result<EtcdServer, String> {
    tokio::spawn(EtcdServer::start()).await.map_err(|_| {
        "error: could not start a throwaway etcd (the reason is above).\n\
         Install it (Debian/Ubuntu: scripts/ensure-etcd, or run scripts/demo --engine etcd, \
         which does), or run the demo with --engine redis"
            .to_owned()
    })
}

/// A throwaway PostgreSQL server from the harness; the error says what to do when it cannot
/// start (the harness's own reason, from its panic, is printed above it).
async fn start_postgres() -> Result<PgServer, String> {
    tokio::spawn(PgServer::start()).await.map_err(|_| {
        "error: could not start a throwaway PostgreSQL (the reason is above).\n\
         Install it (Debian/Ubuntu: scripts/ensure-postgres, or run scripts/demo --engine \
         postgres, which does), or run the demo with --engine redis"
            .to_owned()
    })
}

/// A throwaway MariaDB server from the harness; the error says what to do when it cannot
/// start (the harness's own reason, from its panic, is printed above it).
async fn start_mysql() -> Result<MysqlServer, String> {
    tokio::spawn(MysqlServer::start()).await.map_err(|_| {
        "error: could not start a throwaway MariaDB (the reason is above).\n\
         Install it (Debian/Ubuntu: scripts/ensure-mysql, or run scripts/demo --engine mysql, \
         which does), or run the demo with --engine redis"
            .to_owned()
    })
}

/// Whether `redis-server` can be run: `LEASEHOLD_REDIS_SERVER`, or on `PATH`.
fn redis_server_installed() -> Result<(), String> {
    if let Some(path) = std::env::var_os("LEASEHOLD_REDIS_SERVER") {
        if PathBuf::from(&path).is_file() {
            return Ok(());
        }
    }
    let on_path = std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|dir| dir.join("redis-server").is_file())
    });
    if on_path {
        return Ok(());
    }
    Err(
        "error: redis-server is not installed, and REDIS_URL is not set.\n\
         Install it (Debian/Ubuntu: sudo apt-get install redis-server, or run scripts/demo, \
         which does), or point the demo at a running Redis: REDIS_URL=redis://host:6379"
            .to_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Args, String> {
        Args::parse(args.iter().map(|a| (*a).to_owned()))
    }

    #[test]
    fn flags() {
        let args = parse(&["--purchases", "300", "--stock=30", "--shops", "3"]).unwrap();
        assert_eq!((args.purchases, args.stock, args.shops), (300, 30, 3));
        assert_eq!(args.concurrency, 200);
        let url = parse(&["--redis-url", "redis://h:1"]).unwrap().redis_url;
        assert_eq!(url.as_deref(), Some("redis://h:1"));
        assert!(parse(&["--stock", "0"]).unwrap_err().contains(">= 1"));
        assert!(parse(&["--bogus"])
            .unwrap_err()
            .contains("unknown argument"));
        assert!(parse(&["--shops"]).unwrap_err().contains("needs a value"));
        assert_eq!(parse(&["--help"]).unwrap_err(), USAGE);
    }

    #[test]
    fn engines() {
        assert_eq!(parse(&[]).unwrap().engine, Engine::Redis);
        let zookeeper = parse(&["--engine", "zookeeper"]).unwrap();
        assert_eq!(zookeeper.engine, Engine::ZooKeeper);
        assert_eq!(parse(&["--engine=redis"]).unwrap().engine, Engine::Redis);
        assert_eq!(parse(&["--engine", "etcd"]).unwrap().engine, Engine::Etcd);
        let postgres = parse(&["--engine=postgres"]).unwrap();
        assert_eq!(postgres.engine, Engine::Postgres);
        assert!(postgres
            .engine
            .label()
            .contains("fenced in the same transaction"));
        assert!(USAGE.contains("redis|zookeeper|etcd|postgres|mysql"));
        let mysql = parse(&["--engine", "mysql"]).unwrap();
        assert_eq!(mysql.engine, Engine::Mysql);
        assert!(mysql
            .engine
            .label()
            .contains("fenced in the same transaction"));
        let unknown = parse(&["--engine", "consul"]).unwrap_err();
        assert!(
            unknown.starts_with(
                "--engine \"consul\": expected redis, zookeeper, etcd, postgres or mysql"
            ),
            "{unknown}"
        );
        assert!(unknown.contains("usage: demo"), "{unknown}");
        assert!(parse(&["--engine"]).unwrap_err().contains("needs a value"));
    }
}
