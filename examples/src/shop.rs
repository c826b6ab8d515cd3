//! What the two shop servers share: their state, command line, JSON bodies and errors, and
//! the HTTP answers for both frameworks. The handlers themselves, with `#[distributed_lock]`,
//! are in `src/bin/shop-actix.rs` and `src/bin/shop-axum.rs`.

use std::fmt;
use std::time::Duration;

use actix_web::ResponseError;
use axum::response::IntoResponse;
use leasehold::{LockError, LockGuard, Locker, LostReason};
use serde::{Deserialize, Serialize};

use crate::raw_lock::RawLock;
use crate::reservation::ReservationLocks;
use crate::store::{Purchase, PurchaseFencing, Stock, Store, StoreError};

/// The state of a shop process: the stock store and the locker, on the same Redis server or on
/// two (`--store-url`), or the locker on ZooKeeper (`--zookeeper`) or etcd (`--etcd`), or both
/// in one PostgreSQL database (`--postgres`).
pub struct Shop {
    /// Where the stock and the order counter live (`--store-url`, or `--postgres`).
    pub store: Store,
    /// The locker of the purchase handlers, on the lock server (`--redis-url`, `--zookeeper`,
    /// `--etcd` or `--postgres`); in memory and unused with `--no-lock` and `--raw-lock`.
    pub locker: Locker,
    /// `--raw-lock`: the hand-written lock the purchases take instead, on `--redis-url`.
    pub raw_lock: Option<RawLock>,
    /// How `POST /reservations/{show}` takes its locks (`--reservation-locks`, or none with
    /// `--no-lock`).
    pub reservations: ReservationLocks,
}

/// `PUT /stock/{sku}`'s body.
#[derive(Clone, Copy, Debug, Deserialize, Serialize)]
pub struct Restock {
    /// The new quantity, with nothing sold.
    pub quantity: i64,
}

/// `POST /orders/{sku}`'s answer.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
pub struct Order {
    /// The order's id, unique across shops.
    pub order_id: String,
    /// The sku bought.
    pub sku: String,
    /// The fencing token the purchase wrote with; 0 without the lock.
    pub fence: u64,
}

/// Why a shop request failed. Lock errors are answered as `leasehold` maps them (409/503
/// with `Retry-After`); the others as `{"error": "<code>"}`.
#[derive(Debug)]
pub enum ShopError {
    /// 409 `sold_out`: nothing left to buy.
    SoldOut,
    /// 404 `unknown_sku`: no stock was ever set for the sku.
    UnknownSku,
    /// 400 `invalid_quantity`: a negative quantity.
    InvalidQuantity,
    /// 400 `invalid_seats`: a reservation of no seat, of more than
    /// [`MAX_SEATS`](crate::reservation::MAX_SEATS), or of a seat twice.
    InvalidSeats,
    /// The lock: busy, unavailable, lost (including a write refused for a stale fence).
    Lock(LockError),
    /// 503 `store_unavailable`: the store failed while reading or writing the stock.
    Store(StoreError),
}

impl fmt::Display for ShopError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShopError::SoldOut => f.write_str("sold out"),
            ShopError::UnknownSku => f.write_str("unknown sku"),
            ShopError::InvalidQuantity => f.write_str("the quantity must not be negative"),
            ShopError::InvalidSeats => write!(
                f,
                "a reservation names 1 to {} seats, each once",
                crate::reservation::MAX_SEATS
            ),
            ShopError::Lock(e) => e.fmt(f),
            ShopError::Store(e) => write!(f, "the stock store failed: {e}"),
        }
    }
}

impl std::error::Error for ShopError {}

impl From<LockError> for ShopError {
    fn from(e: LockError) -> Self {
        ShopError::Lock(e)
    }
}

impl From<StoreError> for ShopError {
    fn from(e: StoreError) -> Self {
        ShopError::Store(e)
    }
}

impl ShopError {
    /// Status and body code of the errors that are the shop's own; `None` for lock errors.
    fn answer(&self) -> Option<(u16, &'static str)> {
        match self {
            ShopError::SoldOut => Some((409, "sold_out")),
            ShopError::UnknownSku => Some((404, "unknown_sku")),
            ShopError::InvalidQuantity => Some((400, "invalid_quantity")),
            ShopError::InvalidSeats => Some((400, "invalid_seats")),
            ShopError::Store(e) => {
                eprintln!("stock store error: {e}");
                Some((503, "store_unavailable"))
            }
            ShopError::Lock(_) => None,
        }
    }
}

impl ResponseError for ShopError {
    fn status_code(&self) -> actix_web::http::StatusCode {
        match (self, self.answer()) {
            (ShopError::Lock(e), _) => e.status_code(),
            (_, Some((status, _))) => actix_web::http::StatusCode::from_u16(status)
                .unwrap_or(actix_web::http::StatusCode::INTERNAL_SERVER_ERROR),
            (_, None) => actix_web::http::StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> actix_web::HttpResponse {
        match (self, self.answer()) {
            (ShopError::Lock(e), _) => e.error_response(),
            (_, answer) => {
                let code = answer.map_or("internal", |(_, code)| code);
                actix_web::HttpResponse::build(self.status_code())
                    .json(serde_json::json!({ "error": code }))
            }
        }
    }
}

impl IntoResponse for ShopError {
    fn into_response(self) -> axum::response::Response {
        match (self.answer(), self) {
            (_, ShopError::Lock(e)) => e.into_response(),
            (Some((status, code)), _) => {
                let status = axum::http::StatusCode::from_u16(status)
                    .unwrap_or(axum::http::StatusCode::INTERNAL_SERVER_ERROR);
                (status, axum::Json(serde_json::json!({ "error": code }))).into_response()
            }
            (None, _) => axum::http::StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        }
    }
}

impl Shop {
    /// Connects the store to the store server (`--store-url`, or the database of `--postgres`)
    /// and, unless `--no-lock`, the locker (prefix `shop`) to the lock server (`--zookeeper`,
    /// `--etcd` or `--postgres` if given, else `--redis-url`).
    ///
    /// # Errors
    /// A message saying which server could not be reached: the stock store or the lock server.
    pub async fn start(args: &ShopArgs) -> Result<Shop, String> {
        let store = Store::connect(&args.store_url).await;
        let store = store
            .map(|store| store.with_fencing(args.fencing))
            .map_err(|e| {
                let flag = match args.lock_server {
                    LockServer::Postgres(_) => "--postgres",
                    LockServer::Mysql(_) => "--mysql",
                    _ => "--store-url, by default the lock server",
                };
                format!(
                    "cannot reach the stock store at {} ({flag}): {e}",
                    server(&args.store_url)
                )
            })?;
        let raw_lock = if args.lock == PurchaseLock::ByHand {
            Some(
                RawLock::connect(&args.redis_url, args.lock_wait)
                    .await
                    .map_err(|e| {
                        format!(
                            "cannot reach the lock server at {} (--redis-url): {e}",
                            server(&args.redis_url)
                        )
                    })?,
            )
        } else {
            None
        };
        let locker = if args.lock != PurchaseLock::Leasehold {
            Locker::in_memory()
        } else {
            let builder = Locker::builder()
                .prefix("shop")
                .default_lease(Duration::from_secs(10))
                .default_wait(args.lock_wait);
            let (builder, server, flag) = match &args.lock_server {
                LockServer::ZooKeeper(hosts) => (
                    builder.zookeeper(hosts.as_str()),
                    hosts.clone(),
                    "--zookeeper",
                ),
                LockServer::Etcd(endpoints) => (
                    builder.etcd(endpoints.split(',')),
                    endpoints.clone(),
                    "--etcd",
                ),
                LockServer::Postgres(url) => {
                    (builder.postgres(url.as_str()), server(url), "--postgres")
                }
                LockServer::Mysql(url) => (builder.mysql(url.as_str()), server(url), "--mysql"),
                LockServer::Redis => (
                    builder.url(args.redis_url.as_str()),
                    server(&args.redis_url),
                    "--redis-url",
                ),
            };
            builder
                .build()
                .await
                .map_err(|e| format!("cannot reach the lock server at {server} ({flag}): {e}"))?
        };
        let reservations = match args.lock {
            PurchaseLock::Off => ReservationLocks::Off,
            _ => args.reservation_locks,
        };
        Ok(Shop {
            store,
            locker,
            raw_lock,
            reservations,
        })
    }

    /// `PUT /stock/{sku}`: the stock is `quantity`, nothing sold. `holder`: the lock's guard,
    /// whose fence claims the stock record before the write.
    ///
    /// # Errors
    /// [`ShopError::InvalidQuantity`], [`ShopError::Store`], or `Lock(Lost)` for a stale fence.
    pub async fn restock(
        &self,
        sku: &str,
        quantity: i64,
        holder: Option<&LockGuard>,
    ) -> Result<Stock, ShopError> {
        if quantity < 0 {
            return Err(ShopError::InvalidQuantity);
        }
        match self.store.restock(sku, quantity, holder).await? {
            Some(stock) => Ok(stock),
            None => Err(stale_fence()),
        }
    }

    /// `GET /stock/{sku}`.
    ///
    /// # Errors
    /// [`ShopError::UnknownSku`], [`ShopError::Store`].
    pub async fn stock(&self, sku: &str) -> Result<Stock, ShopError> {
        self.store.stock(sku).await?.ok_or(ShopError::UnknownSku)
    }

    /// `POST /orders/{sku}`: the naive purchase of [`Store::purchase`], which the lock (when
    /// there is one) serializes; `holder` is the lock's guard, whose fence the purchase's
    /// read carries (in Redis, the read claims the stock record) and its write is checked
    /// against.
    ///
    /// # Errors
    /// [`ShopError::SoldOut`], [`ShopError::UnknownSku`], [`ShopError::Store`], or
    /// `Lock(Lost)` when the claim or the write was refused for a stale fence.
    pub async fn buy(&self, sku: &str, holder: Option<&LockGuard>) -> Result<Order, ShopError> {
        let fence = holder.map_or(0, LockGuard::fence);
        Self::order(sku, fence, self.store.purchase(sku, holder).await?)
    }

    /// `POST /orders/{sku}` under the hand-written lock of `--raw-lock` (on a Redis stock):
    /// the same purchase, its claim and its write carrying that lock's fence; a lock still busy
    /// after `--lock-wait` is 409 `lock_busy`.
    ///
    /// # Errors
    /// As [`Shop::buy`]; `Lock(Busy)` when the lock stayed taken.
    pub async fn buy_under_raw_lock(&self, sku: &str) -> Result<Order, ShopError> {
        let (Some(raw), Store::Redis(stock)) = (&self.raw_lock, &self.store) else {
            return Err(ShopError::Lock(LockError::Config {
                message: "--raw-lock needs its lock on --redis-url and the stock in Redis".into(),
                source: None,
            }));
        };
        let Some(hold) = raw.lock(sku, Duration::from_secs(10)).await? else {
            return Err(ShopError::Lock(LockError::Busy { retry_after: None }));
        };
        let fence = hold.fence;
        let purchase = stock.purchase(sku, Some(fence)).await;
        // A failed give-back loses nothing: the lock ends with its lease, and the purchase's
        // outcome (a sale may have been written) is what the caller must hear.
        if let Err(e) = raw.unlock(hold).await {
            eprintln!("the lock by hand of {sku} was not given back (it ends with its lease): {e}");
        }
        Self::order(sku, fence, purchase?)
    }

    fn order(sku: &str, fence: u64, purchase: Purchase) -> Result<Order, ShopError> {
        match purchase {
            Purchase::Sold { order } => Ok(Order {
                order_id: format!("ord-{order}"),
                sku: sku.to_owned(),
                fence,
            }),
            Purchase::SoldOut => Err(ShopError::SoldOut),
            Purchase::UnknownSku => Err(ShopError::UnknownSku),
            Purchase::Stale => Err(stale_fence()),
        }
    }
}

/// The store refused a write with this holder's fence: a newer holder took the lock.
fn stale_fence() -> ShopError {
    ShopError::from(LockError::Lost {
        reason: LostReason::StaleFence,
    })
}

/// The server a Redis or PostgreSQL URL names (`host:port`, and the database for PostgreSQL;
/// never a password), for error messages.
fn server(url: &str) -> String {
    use redis::IntoConnectionInfo;
    if Store::is_postgres(url) {
        return crate::store::PgStock::server(url);
    }
    if Store::is_mysql(url) {
        return crate::store::MyStock::server(url);
    }
    url.into_connection_info().map_or_else(
        |_| "an invalid URL".to_owned(),
        |info| info.addr().to_string(),
    )
}

/// Where a shop's locks live: one engine, chosen by its flag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LockServer {
    /// The Redis at `--redis-url` (the default).
    Redis,
    /// `--zookeeper`: a ZooKeeper ensemble, `host:port,...`.
    ZooKeeper(String),
    /// `--etcd`: an etcd cluster's endpoints, `[http://]host:port,...`.
    Etcd(String),
    /// `--postgres`: a PostgreSQL database, `postgres://user:password@host:port/database`,
    /// which then holds the stock too, so the fence check and the write commit together.
    Postgres(String),
    /// `--mysql`: a MySQL (or MariaDB) database, `mysql://user:password@host:port/database`,
    /// which then holds the stock too, as with `--postgres`.
    Mysql(String),
}

/// How a shop's purchases are locked (`ShopArgs::lock`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PurchaseLock {
    /// `#[distributed_lock]` on the lock server: the default.
    Leasehold,
    /// `--no-lock`: the same handlers without the attribute, to show the oversell.
    Off,
    /// `--raw-lock`: a lock written by hand on `--redis-url` ([`RawLock`]) instead of the
    /// attribute: the floor `scripts/web-bench` measures.
    ByHand,
}

impl PurchaseLock {
    /// How the shop's start-up line names it.
    pub fn describe(self) -> &'static str {
        match self {
            PurchaseLock::Leasehold => "leasehold",
            PurchaseLock::Off => "off (--no-lock)",
            PurchaseLock::ByHand => "by hand (--raw-lock)",
        }
    }
}

/// The shops' command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShopArgs {
    /// `--port`: 8080 by default; 0 picks a free port.
    pub port: u16,
    /// `--redis-url`: the lock server; `REDIS_URL`, else `redis://127.0.0.1:6379`.
    pub redis_url: String,
    /// `--store-url`: the Redis server of the stock and the order counter; the lock server
    /// (`redis_url`) by default. A server of its own keeps the stock when the lock server
    /// restarts empty. With `--postgres`, its URL: the stock lives next to the locks.
    pub store_url: String,
    /// `--zookeeper` or `--etcd`: lock there instead of on the Redis at `redis_url`, which then
    /// holds only the stock (unless `--store-url` names another); `--postgres`: lock and keep
    /// the stock in that database, and Redis is not used. At most one of the three.
    pub lock_server: LockServer,
    /// How the purchases are locked: `#[distributed_lock]`, not at all (`--no-lock`), or by
    /// hand (`--raw-lock`).
    pub lock: PurchaseLock,
    /// `--lock-wait`: how long a purchase waits for the lock before it is answered 409
    /// `lock_busy`. 30 s by default: long enough for a queue of hundreds of purchases.
    pub lock_wait: Duration,
    /// `--leader NAME`: campaign for the leadership `NAME` (identity `<binary>@<port>`) and
    /// hold it while serving, as a fleet's one reporter or scheduler would; on SIGTERM the
    /// shop closes its locker, so another shop takes over at once.
    pub leader: Option<String>,
    /// How a locked purchase fences a Redis stock: it claims the record before it reads
    /// (the default), or, with the hidden `--fence-write-only`, only its write carries the
    /// fence, as before issue 44. That purchase can lose a sale when a holder's write is
    /// delayed past its lease; it is kept for the fault suite, which shows it (scenario 6).
    pub fencing: PurchaseFencing,
    /// `--reservation-locks together|one-by-one`: how `POST /reservations/{show}` takes its
    /// locks (one `lock_all`, the default, or one lock after another).
    pub reservation_locks: ReservationLocks,
}

impl ShopArgs {
    /// Parses the arguments after the program name; `Err` holds the message to print (the
    /// usage for `--help`).
    ///
    /// # Errors
    /// An unknown flag, a missing or bad value, or `--help`.
    pub fn parse(name: &str, args: impl IntoIterator<Item = String>) -> Result<ShopArgs, String> {
        let usage = format!(
            "usage: {name} [--port N] [--redis-url URL] [--store-url URL] [--zookeeper HOSTS] \
             [--etcd ENDPOINTS] [--postgres URL] [--mysql URL] [--no-lock | --raw-lock] [--lock-wait 30s] \
             [--leader NAME] [--reservation-locks together|one-by-one]\n\n  \
             --port N         the port on 127.0.0.1 (default 8080; 0 picks a free one)\n  \
             --redis-url URL  the lock server (default: $REDIS_URL, else redis://127.0.0.1:6379)\n  \
             --store-url URL  where the stock and the order counter live (default: the lock server);\n                   \
             a server of their own keeps them when the lock server restarts empty\n  \
             --zookeeper H    lock on the ZooKeeper H (host:port,...) instead of --redis-url,\n                   \
             which then holds only the stock\n  \
             --etcd E         lock on the etcd cluster E ([http://]host:port,...) instead of\n                   \
             --redis-url, which then holds only the stock\n  \
             --postgres URL   lock and keep the stock in the PostgreSQL database URL\n                   \
             (postgres://user:password@host:5432/db), fenced in the purchase's transaction;\n                   \
             no Redis is used\n  \
             --mysql URL      the same in the MySQL or MariaDB database URL\n                   \
             (mysql://user:password@host:3306/db)\n  \
             --no-lock        serve the purchase handler without #[distributed_lock]: it oversells\n  \
             --raw-lock       lock each purchase with a lock written by hand on --redis-url\n                   \
             (SET NX PX and a fence in one script, compare-and-delete): a benchmark's floor\n  \
             --lock-wait D    how long a request waits for a busy lock (default 30s)\n  \
             --leader NAME    campaign for the leadership NAME and hold it while serving\n  \
             --reservation-locks together|one-by-one\n                   \
             how POST /reservations/{{show}} takes the show's read lock and its\n                   \
             seats' locks: in one lock_all (the default), or one after another"
        );
        let mut parsed = ShopArgs {
            port: 8080,
            redis_url: std::env::var("REDIS_URL")
                .unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned()),
            store_url: String::new(),
            lock_server: LockServer::Redis,
            lock: PurchaseLock::Leasehold,
            lock_wait: Duration::from_secs(30),
            leader: None,
            fencing: PurchaseFencing::Claim,
            reservation_locks: ReservationLocks::Together,
        };
        let mut store_url = None;
        let (mut no_lock, mut raw_lock) = (false, false);
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((flag, value)) => (flag.to_owned(), Some(value.to_owned())),
                None => (arg, None),
            };
            let mut value = |flag: &str| {
                inline
                    .clone()
                    .or_else(|| args.next())
                    .ok_or_else(|| format!("{flag} needs a value\n\n{usage}"))
            };
            match flag.as_str() {
                "--port" => {
                    let text = value("--port")?;
                    parsed.port = text
                        .parse()
                        .map_err(|_| format!("--port {text:?} is not a port number\n\n{usage}"))?;
                }
                "--redis-url" => parsed.redis_url = value("--redis-url")?,
                "--store-url" => store_url = Some(value("--store-url")?),
                "--zookeeper" | "--etcd" | "--postgres" | "--mysql" => {
                    let value = value(&flag)?;
                    if parsed.lock_server != LockServer::Redis {
                        return Err(format!(
                            "--zookeeper, --etcd, --postgres and --mysql: the locks live in one \
                             place, give one\n\n{usage}"
                        ));
                    }
                    parsed.lock_server = match flag.as_str() {
                        "--etcd" => LockServer::Etcd(value),
                        "--postgres" => LockServer::Postgres(value),
                        "--mysql" => LockServer::Mysql(value),
                        _ => LockServer::ZooKeeper(value),
                    };
                }
                "--no-lock" => no_lock = true,
                "--raw-lock" => raw_lock = true,
                // Hidden from the usage: the purchase before issue 44, for the fault suite.
                "--fence-write-only" => parsed.fencing = PurchaseFencing::WriteOnly,
                "--leader" => parsed.leader = Some(value("--leader")?),
                "--reservation-locks" => {
                    let text = value("--reservation-locks")?;
                    parsed.reservation_locks = ReservationLocks::parse(&text)
                        .map_err(|message| format!("{message}\n\n{usage}"))?;
                }
                "--lock-wait" => {
                    let text = value("--lock-wait")?;
                    parsed.lock_wait = humantime::parse_duration(&text).map_err(|e| {
                        format!("--lock-wait {text:?} is not a duration ({e}), e.g. 30s\n\n{usage}")
                    })?;
                }
                "-h" | "--help" => return Err(usage),
                other => return Err(format!("unknown argument {other:?}\n\n{usage}")),
            }
        }
        if raw_lock && (no_lock || parsed.lock_server != LockServer::Redis) {
            return Err(format!(
                "--raw-lock locks on the Redis at --redis-url: give it without --no-lock, \
                 --zookeeper, --etcd, --postgres or --mysql\n\n{usage}"
            ));
        }
        if parsed.fencing == PurchaseFencing::WriteOnly
            && (no_lock
                || matches!(
                    parsed.lock_server,
                    LockServer::Postgres(_) | LockServer::Mysql(_)
                ))
        {
            return Err(format!(
                "--fence-write-only fences the write of a locked purchase in Redis alone: give \
                 it without --no-lock and --postgres (whose purchase checks its lock in its \
                 transaction, before it reads)\n\n{usage}"
            ));
        }
        if no_lock {
            parsed.lock = PurchaseLock::Off;
        } else if raw_lock {
            parsed.lock = PurchaseLock::ByHand;
        }
        parsed.store_url = match (&parsed.lock_server, store_url) {
            (LockServer::Postgres(_), Some(_)) => {
                return Err(format!(
                    "--store-url and --postgres: with --postgres the stock lives in that \
                     database, next to its locks, so that the fence check and the write commit \
                     together; drop --store-url\n\n{usage}"
                ))
            }
            (LockServer::Mysql(_), Some(_)) => {
                return Err(format!(
                    "--store-url and --mysql: with --mysql the stock lives in that database, \
                     next to its locks; drop --store-url\n\n{usage}"
                ))
            }
            (LockServer::Postgres(url) | LockServer::Mysql(url), None) => url.clone(),
            (_, Some(url)) if Store::is_mysql(&url) => {
                return Err(format!(
                    "--store-url takes a Redis URL; to keep the stock in MySQL, give --mysql \
                     URL (the locks then live there too)\n\n{usage}"
                ))
            }
            (_, Some(url)) if Store::is_postgres(&url) => {
                return Err(format!(
                    "--store-url takes a Redis URL; to keep the stock in PostgreSQL, give \
                     --postgres URL (the locks then live there too)\n\n{usage}"
                ))
            }
            (_, store_url) => store_url.unwrap_or_else(|| parsed.redis_url.clone()),
        };
        Ok(parsed)
    }

    /// Parses `std::env::args()`, or prints the message and exits (0 for `--help`, 2 else).
    pub fn from_env(name: &str) -> ShopArgs {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let help = args.iter().any(|a| a == "-h" || a == "--help");
        ShopArgs::parse(name, args).unwrap_or_else(|message| {
            eprintln!("{message}");
            std::process::exit(if help { 0 } else { 2 })
        })
    }
}

/// With `--leader NAME`: campaigns for the leadership `NAME` in the background for as long as
/// the shop runs, as `identity`, printing each term it leads (`leader NAME: term T`).
pub fn campaign(shop: &Shop, args: &ShopArgs, identity: String) {
    let Some(name) = args.leader.clone() else {
        return;
    };
    let locker = shop.locker.clone();
    tokio::spawn(async move {
        let outcome = locker
            .leader(name.as_str())
            .identity(identity)
            .wait(Duration::from_secs(3600))
            .run_while_leader(|leadership| {
                println!("leader {name}: term {}", leadership.term());
                std::future::pending::<()>()
            })
            .await;
        if let Err(e) = outcome {
            println!("leader {name}: campaign ended: {e}");
        }
    });
}

/// Resolves on SIGTERM or Ctrl-C: the start of a graceful shutdown.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<ShopArgs, String> {
        ShopArgs::parse("shop", args.iter().map(|a| (*a).to_owned()))
    }

    #[test]
    fn flags() {
        let args = parse(&[
            "--port",
            "9000",
            "--redis-url=redis://h:1",
            "--no-lock",
            "--lock-wait",
            "250ms",
        ])
        .unwrap();
        assert_eq!(args.lock_wait, Duration::from_millis(250));
        assert_eq!(args.port, 9000);
        assert_eq!(args.redis_url, "redis://h:1");
        assert_eq!(
            args.store_url, "redis://h:1",
            "the store is on the lock server"
        );
        assert_eq!(args.lock, PurchaseLock::Off);
        assert_eq!(args.lock_server, LockServer::Redis);
        assert_eq!(parse(&[]).unwrap().port, 8080);
        assert!(parse(&["--port", "x"]).unwrap_err().contains("not a port"));
        assert!(parse(&["--port"]).unwrap_err().contains("needs a value"));
        assert!(parse(&["--lock"]).unwrap_err().contains("unknown argument"));
        assert!(parse(&["--help"]).unwrap_err().starts_with("usage"));
        assert!(parse(&["--help"]).unwrap_err().contains("--store-url URL"));
        assert!(parse(&["--store-url"])
            .unwrap_err()
            .contains("needs a value"));
    }

    #[test]
    fn reservations_take_their_locks_together_unless_told_one_by_one() {
        use crate::reservation::ReservationLocks;
        assert_eq!(
            parse(&[]).unwrap().reservation_locks,
            ReservationLocks::Together
        );
        let args = parse(&["--reservation-locks", "one-by-one"]).unwrap();
        assert_eq!(args.reservation_locks, ReservationLocks::OneByOne);
        let args = parse(&["--reservation-locks=together"]).unwrap();
        assert_eq!(args.reservation_locks, ReservationLocks::Together);
        let e = parse(&["--reservation-locks", "all"]).unwrap_err();
        assert!(
            e.starts_with("--reservation-locks \"all\": give together"),
            "{e}"
        );
        assert!(parse(&["--help"])
            .unwrap_err()
            .contains("--reservation-locks together|one-by-one"));
    }

    #[test]
    fn purchases_claim_the_record_unless_told_to_fence_the_write_only() {
        assert_eq!(parse(&[]).unwrap().fencing, PurchaseFencing::Claim);
        let old = parse(&["--fence-write-only", "--store-url", "redis://s:2"]).unwrap();
        assert_eq!(old.fencing, PurchaseFencing::WriteOnly);
        assert_eq!(old.lock, PurchaseLock::Leasehold);
        let raw = parse(&["--raw-lock", "--fence-write-only"]).unwrap();
        assert_eq!(raw.fencing, PurchaseFencing::WriteOnly);
        for other in [
            &["--fence-write-only", "--no-lock"][..],
            &["--postgres", "postgres://p/db", "--fence-write-only"],
        ] {
            let e = parse(other).unwrap_err();
            assert!(e.starts_with("--fence-write-only fences the write"), "{e}");
        }
        assert!(
            !parse(&["--help"]).unwrap_err().contains("fence-write-only"),
            "a test's flag, hidden"
        );
    }

    #[test]
    fn a_lock_by_hand_is_on_redis_alone() {
        let args = parse(&["--raw-lock", "--redis-url", "redis://h:1"]).unwrap();
        assert_eq!(args.lock, PurchaseLock::ByHand);
        assert_eq!(args.store_url, "redis://h:1");
        for other in [
            &["--raw-lock", "--no-lock"][..],
            &["--raw-lock", "--etcd", "http://e:2379"],
            &["--zookeeper", "z:2181", "--raw-lock"],
            &["--raw-lock", "--postgres", "postgres://p/db"],
        ] {
            let e = parse(other).unwrap_err();
            assert!(
                e.starts_with("--raw-lock locks on the Redis at --redis-url"),
                "{e}"
            );
        }
    }

    #[test]
    fn the_store_can_have_a_server_of_its_own() {
        // In either order: the default follows `--redis-url` wherever it comes.
        for args in [
            ["--store-url", "redis://s:2", "--redis-url", "redis://h:1"],
            ["--redis-url", "redis://h:1", "--store-url", "redis://s:2"],
        ] {
            let args = parse(&args).unwrap();
            assert_eq!(args.redis_url, "redis://h:1");
            assert_eq!(args.store_url, "redis://s:2");
        }
        let args = parse(&["--store-url=redis://s:2"]).unwrap();
        assert_eq!(args.store_url, "redis://s:2");
        assert_ne!(args.redis_url, args.store_url);
    }

    #[test]
    fn locks_can_live_in_zookeeper_and_the_stock_in_redis() {
        let args = parse(&[
            "--zookeeper",
            "127.0.0.1:2181,h:2",
            "--redis-url=redis://s:2",
        ])
        .unwrap();
        assert_eq!(
            args.lock_server,
            LockServer::ZooKeeper("127.0.0.1:2181,h:2".to_owned())
        );
        assert_eq!(args.store_url, "redis://s:2");
        assert!(parse(&["--zookeeper"])
            .unwrap_err()
            .contains("needs a value"));
    }

    #[test]
    fn locks_can_live_in_etcd_and_the_stock_in_redis() {
        let args = parse(&[
            "--etcd=http://127.0.0.1:2379,h:2",
            "--redis-url",
            "redis://s:2",
        ])
        .unwrap();
        assert_eq!(
            args.lock_server,
            LockServer::Etcd("http://127.0.0.1:2379,h:2".to_owned())
        );
        assert_eq!(args.store_url, "redis://s:2");
        assert!(parse(&["--etcd"]).unwrap_err().contains("needs a value"));
        let both = parse(&["--etcd", "h:1", "--zookeeper", "h:2"]).unwrap_err();
        assert!(
            both.starts_with("--zookeeper, --etcd, --postgres and --mysql"),
            "{both}"
        );
    }

    #[test]
    fn locks_and_stock_can_live_in_postgres() {
        let url = "postgres://u:pw@127.0.0.1:5432/shop";
        let args = parse(&["--postgres", url, "--no-lock"]).unwrap();
        assert_eq!(args.lock_server, LockServer::Postgres(url.to_owned()));
        assert_eq!(args.store_url, url, "the stock lives next to the locks");
        assert_eq!(args.lock, PurchaseLock::Off);
        assert!(parse(&["--postgres"])
            .unwrap_err()
            .contains("needs a value"));
        let both = parse(&["--postgres", url, "--etcd", "h:1"]).unwrap_err();
        assert!(
            both.starts_with("--zookeeper, --etcd, --postgres and --mysql"),
            "{both}"
        );
        for args in [
            ["--store-url", "redis://s:2", "--postgres", url],
            ["--postgres", url, "--store-url", "redis://s:2"],
        ] {
            let apart = parse(&args).unwrap_err();
            assert!(apart.starts_with("--store-url and --postgres"), "{apart}");
        }
        let stock_only = parse(&["--store-url", url]).unwrap_err();
        assert!(stock_only.contains("give --postgres URL"), "{stock_only}");
        assert!(parse(&["--help"]).unwrap_err().contains("--postgres URL"));
        assert_eq!(server(url), "127.0.0.1:5432/shop", "never the password");
    }

    #[test]
    fn locks_and_stock_can_live_in_mysql() {
        let url = "mysql://u:pw@127.0.0.1:3306/shop";
        let args = parse(&["--mysql", url]).unwrap();
        assert_eq!(args.lock_server, LockServer::Mysql(url.to_owned()));
        assert_eq!(args.store_url, url, "the stock lives next to the locks");
        let apart = parse(&["--mysql", url, "--store-url", "redis://s:2"]).unwrap_err();
        assert!(apart.starts_with("--store-url and --mysql"), "{apart}");
        let stock_only = parse(&["--store-url", url]).unwrap_err();
        assert!(stock_only.contains("give --mysql URL"), "{stock_only}");
        let both = parse(&["--mysql", url, "--postgres", "postgres://p/db"]).unwrap_err();
        assert!(
            both.starts_with("--zookeeper, --etcd, --postgres and --mysql"),
            "{both}"
        );
        assert!(parse(&["--mysql", url, "--fence-write-only"]).is_err());
        assert_eq!(server(url), "127.0.0.1:3306/shop", "never the password");
    }
}
