//! The shop on axum (binary `shop-axum`), with the same API as `shop-actix`. Stock lives in
//! Redis, or in PostgreSQL with `--postgres`; a purchase is a naive read-check-write that only `#[distributed_lock]` keeps from
//! overselling when several shop processes serve it.
//!
//! ```text
//! PUT  /stock/{sku}   {"quantity": N}  -> 200 {"sku", "quantity", "sold"}
//! GET  /stock/{sku}                    -> 200 {"sku", "quantity", "sold"} | 404
//! POST /orders/{sku}                   -> 201 {"order_id", "sku", "fence"} | 409 sold_out | lock errors
//! POST /reservations/{show} {"seats": [sku, ...]}
//!                                      -> 201 {"show", "orders": [order, ...]} | 400 invalid_seats
//!                                         | 409 sold_out | lock errors (not with --raw-lock)
//! GET  /metrics                        -> 200 leasehold's metrics, Prometheus text format
//! GET  /ready                          -> 200 {"engine": "connected"} | 503 {"engine": "suspended"}
//! ```
//!
//! `shop-axum [--port 8080] [--redis-url URL] [--store-url URL] [--zookeeper HOSTS]
//! [--etcd ENDPOINTS] [--postgres URL] [--no-lock | --raw-lock] [--lock-wait 30s]`: locks on `--redis-url`
//! (or on ZooKeeper with `--zookeeper`, on etcd with `--etcd`), stock and order counter on
//! `--store-url` (the Redis at `--redis-url` by default); with `--postgres`, locks, stock and
//! order counter all in that database.

use std::sync::Arc;

use crate::reservation::{Reservation, Reserved};
use crate::shop::{Order, PurchaseLock, Restock, Shop, ShopArgs, ShopError};
use crate::store::Stock;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post, put};
use axum::{Json, Router};
use leasehold::distributed_lock;

/// The locked purchase: the lock `stock:<sku>` (through the shop's locker) is held while the
/// body reads, checks and writes the stock, and its fencing token goes with the read (which
/// claims the stock record) and with the write, which the record refuses once a newer token
/// claimed it: a purchase whose lease ended writes nothing, however late its write arrives.
/// A purchase waits for the lock as long as the locker's default wait (`--lock-wait`, 30 s),
/// then is answered 409 `lock_busy`.
#[distributed_lock(key = "stock:<sku>", lease = "10s", locker = shop.locker, guard = lock)]
async fn buy(
    State(shop): State<Arc<Shop>>,
    Path(sku): Path<String>,
) -> Result<(StatusCode, Json<Order>), ShopError> {
    let order = shop.buy(&sku, Some(lock)).await?;
    Ok((StatusCode::CREATED, Json(order)))
}

/// The same purchase without the attribute (`--no-lock`): it oversells.
async fn buy_without_lock(
    State(shop): State<Arc<Shop>>,
    Path(sku): Path<String>,
) -> Result<(StatusCode, Json<Order>), ShopError> {
    let order = shop.buy(&sku, None).await?;
    Ok((StatusCode::CREATED, Json(order)))
}

/// The same purchase under a lock written by hand (`--raw-lock`): the web benchmark's floor.
async fn buy_under_raw_lock(
    State(shop): State<Arc<Shop>>,
    Path(sku): Path<String>,
) -> Result<(StatusCode, Json<Order>), ShopError> {
    let order = shop.buy_under_raw_lock(&sku).await?;
    Ok((StatusCode::CREATED, Json(order)))
}

#[distributed_lock(key = "stock:<sku>", lease = "10s", locker = shop.locker, guard = lock)]
async fn restock(
    State(shop): State<Arc<Shop>>,
    Path(sku): Path<String>,
    Json(body): Json<Restock>,
) -> Result<Json<Stock>, ShopError> {
    Ok(Json(shop.restock(&sku, body.quantity, Some(lock)).await?))
}

async fn restock_without_lock(
    State(shop): State<Arc<Shop>>,
    Path(sku): Path<String>,
    Json(body): Json<Restock>,
) -> Result<Json<Stock>, ShopError> {
    Ok(Json(shop.restock(&sku, body.quantity, None).await?))
}

/// `POST /reservations/{show}`: every seat of the body, one item each, all or none, under
/// the locks the shop's `--reservation-locks` says (none with `--no-lock`).
async fn reserve(
    State(shop): State<Arc<Shop>>,
    Path(show): Path<String>,
    Json(body): Json<Reservation>,
) -> Result<(StatusCode, Json<Reserved>), ShopError> {
    let reserved = shop.reserve(&show, &body.seats).await?;
    Ok((StatusCode::CREATED, Json(reserved)))
}

async fn stock(
    State(shop): State<Arc<Shop>>,
    Path(sku): Path<String>,
) -> Result<Json<Stock>, ShopError> {
    Ok(Json(shop.stock(&sku).await?))
}

/// Readiness for an orchestrator: 200 while the lock engine answers (connected or
/// reconnected), 503 while it is suspended or lost (or the locker is closed), with the state
/// in the body. `Locker::state` is one atomic read: no round trip, so the probe may ask
/// often. Liveness is another matter: a shop whose engine is out is alive, and restarting it
/// would not bring the engine back.
async fn ready(State(shop): State<Arc<Shop>>) -> (StatusCode, Json<serde_json::Value>) {
    let state = shop.locker.state();
    let status = match state.is_connected() {
        true => StatusCode::OK,
        false => StatusCode::SERVICE_UNAVAILABLE,
    };
    (
        status,
        Json(serde_json::json!({ "engine": state.as_str() })),
    )
}

/// The buckets of leasehold's histograms (all of them in seconds): from a millisecond, for
/// uncontended acquires, to a minute, for long holds.
const SECONDS_BUCKETS: [f64; 15] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// Serves the shop until the process is stopped, on a multi-threaded Tokio runtime.
///
/// # Errors
/// When the runtime cannot start or the port cannot be bound.
pub fn serve(args: ShopArgs) -> std::io::Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run(args))
}

async fn run(args: ShopArgs) -> std::io::Result<()> {
    // Before the locker is built: it registers its engine-state gauges as it starts. The
    // library's histograms get buckets (`_bucket` series, which `histogram_quantile` in the
    // dashboard ops/grafana/leasehold.json aggregates across shops), not the exporter's
    // default summaries.
    let installed = metrics_exporter_prometheus::PrometheusBuilder::new()
        .set_buckets_for_metric(
            metrics_exporter_prometheus::Matcher::Prefix("leasehold_".into()),
            &SECONDS_BUCKETS,
        )
        .and_then(|builder| builder.install_recorder());
    let metrics = match installed {
        Ok(handle) => handle,
        Err(e) => {
            eprintln!("shop-axum: cannot install the metrics recorder: {e}");
            std::process::exit(1);
        }
    };
    let shop = match Shop::start(&args).await {
        Ok(shop) => Arc::new(shop),
        Err(message) => {
            eprintln!("shop-axum: {message}");
            std::process::exit(1);
        }
    };
    // Histograms are summarised on a schedule, not on every scrape.
    let upkeep = metrics.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(5));
        loop {
            tick.tick().await;
            upkeep.run_upkeep();
        }
    });
    let router = Router::new()
        .route("/stock/{sku}", get(stock))
        .route("/ready", get(ready))
        .route("/metrics", get(move || async move { metrics.render() }));
    let router = match args.lock {
        PurchaseLock::Leasehold => router
            .route("/stock/{sku}", put(restock))
            .route("/orders/{sku}", post(buy))
            .route("/reservations/{show}", post(reserve)),
        PurchaseLock::Off => router
            .route("/stock/{sku}", put(restock_without_lock))
            .route("/orders/{sku}", post(buy_without_lock))
            .route("/reservations/{show}", post(reserve)),
        PurchaseLock::ByHand => router
            .route("/stock/{sku}", put(restock_without_lock))
            .route("/orders/{sku}", post(buy_under_raw_lock)),
    };
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", args.port)).await?;
    println!(
        "shop-axum listening on http://{} (lock: {})",
        listener.local_addr()?,
        args.lock.describe()
    );
    let identity = format!("shop-axum@{}", listener.local_addr()?.port());
    crate::shop::campaign(&shop, &args, identity);
    let locker = shop.locker.clone();
    // On SIGTERM or Ctrl-C: stop taking requests, finish those in flight, then give back
    // every lock (and a leadership) before exiting.
    let server = axum::serve(listener, router.with_state(shop))
        .with_graceful_shutdown(crate::shop::shutdown_signal());
    locker.close_after(server).await
}
