//! The shop on actix-web (binary `shop-actix`). Stock lives in Redis, or in PostgreSQL with
//! `--postgres`; a purchase is a naive
//! read-check-write that only `#[distributed_lock]` keeps from overselling when several shop
//! processes serve it.
//!
//! ```text
//! PUT  /stock/{sku}   {"quantity": N}  -> 200 {"sku", "quantity", "sold"}
//! GET  /stock/{sku}                    -> 200 {"sku", "quantity", "sold"} | 404
//! POST /orders/{sku}                   -> 201 {"order_id", "sku", "fence"} | 409 sold_out | lock errors
//! POST /reservations/{show} {"seats": [sku, ...]}
//!                                      -> 201 {"show", "orders": [order, ...]} | 400 invalid_seats
//!                                         | 409 sold_out | lock errors (not with --raw-lock)
//! GET  /ready                          -> 200 {"engine": "connected"} | 503 {"engine": "suspended"}
//! ```
//!
//! `shop-actix [--port 8080] [--redis-url URL] [--store-url URL] [--zookeeper HOSTS]
//! [--etcd ENDPOINTS] [--postgres URL] [--no-lock | --raw-lock] [--lock-wait 30s]`: locks on `--redis-url`
//! (or on ZooKeeper with `--zookeeper`, on etcd with `--etcd`), stock and order counter on
//! `--store-url` (the Redis at `--redis-url` by default); with `--postgres`, locks, stock and
//! order counter all in that database.

use crate::reservation::Reservation;
use crate::shop::{PurchaseLock, Restock, Shop, ShopArgs, ShopError};
use actix_web::{get, post, put, web, App, HttpResponse, HttpServer};
use leasehold::distributed_lock;

/// The locked purchase: the lock `stock:<sku>` (through the global default locker) is held
/// while the body reads, checks and writes the stock, and its fencing token goes with the
/// read (which claims the stock record) and with the write, which the record refuses once a
/// newer token claimed it: a purchase whose lease ended writes nothing, however late its
/// write arrives. A purchase waits for the lock as long as the locker's default wait
/// (`--lock-wait`, 30 s), then is answered 409 `lock_busy`.
#[post("/orders/{sku}")]
#[distributed_lock(key = "stock:<sku>", lease = "10s", guard = lock)]
async fn buy(sku: web::Path<String>, shop: web::Data<Shop>) -> Result<HttpResponse, ShopError> {
    let order = shop.buy(&sku, Some(lock)).await?;
    Ok(HttpResponse::Created().json(order))
}

/// The same purchase without the attribute (`--no-lock`): it oversells.
#[post("/orders/{sku}")]
async fn buy_without_lock(
    sku: web::Path<String>,
    shop: web::Data<Shop>,
) -> Result<HttpResponse, ShopError> {
    let order = shop.buy(&sku, None).await?;
    Ok(HttpResponse::Created().json(order))
}

/// The same purchase under a lock written by hand (`--raw-lock`): the web benchmark's floor.
#[post("/orders/{sku}")]
async fn buy_under_raw_lock(
    sku: web::Path<String>,
    shop: web::Data<Shop>,
) -> Result<HttpResponse, ShopError> {
    let order = shop.buy_under_raw_lock(&sku).await?;
    Ok(HttpResponse::Created().json(order))
}

#[put("/stock/{sku}")]
#[distributed_lock(key = "stock:<sku>", lease = "10s", guard = lock)]
async fn restock(
    sku: web::Path<String>,
    body: web::Json<Restock>,
    shop: web::Data<Shop>,
) -> Result<HttpResponse, ShopError> {
    let stock = shop.restock(&sku, body.quantity, Some(lock)).await?;
    Ok(HttpResponse::Ok().json(stock))
}

#[put("/stock/{sku}")]
async fn restock_without_lock(
    sku: web::Path<String>,
    body: web::Json<Restock>,
    shop: web::Data<Shop>,
) -> Result<HttpResponse, ShopError> {
    let stock = shop.restock(&sku, body.quantity, None).await?;
    Ok(HttpResponse::Ok().json(stock))
}

#[get("/stock/{sku}")]
async fn show_stock(
    sku: web::Path<String>,
    shop: web::Data<Shop>,
) -> Result<HttpResponse, ShopError> {
    Ok(HttpResponse::Ok().json(shop.stock(&sku).await?))
}

/// Readiness for an orchestrator: 200 while the lock engine answers (connected or
/// reconnected), 503 while it is suspended or lost (or the locker is closed), with the state
/// in the body. `Locker::state` is one atomic read: no round trip, so the probe may ask
/// often. Liveness is another matter: a shop whose engine is out is alive, and restarting it
/// would not bring the engine back.
#[get("/ready")]
async fn ready(shop: web::Data<Shop>) -> HttpResponse {
    let state = shop.locker.state();
    let body = serde_json::json!({ "engine": state.as_str() });
    match state.is_connected() {
        true => HttpResponse::Ok().json(body),
        false => HttpResponse::ServiceUnavailable().json(body),
    }
}

/// Serves the shop until the process is stopped, on actix-web's runtime.
///
/// # Errors
/// When the port cannot be bound.
pub fn serve(args: ShopArgs) -> std::io::Result<()> {
    actix_web::rt::System::new().block_on(run(args))
}

/// `POST /reservations/{show}`: every seat of the body, one item each, all or none, under
/// the locks the shop's `--reservation-locks` says (none with `--no-lock`).
#[post("/reservations/{show}")]
async fn reserve(
    show: web::Path<String>,
    body: web::Json<Reservation>,
    shop: web::Data<Shop>,
) -> Result<HttpResponse, ShopError> {
    let reserved = shop.reserve(&show, &body.seats).await?;
    Ok(HttpResponse::Created().json(reserved))
}

async fn run(args: ShopArgs) -> std::io::Result<()> {
    let shop = match Shop::start(&args).await {
        Ok(shop) => shop,
        Err(message) => {
            eprintln!("shop-actix: {message}");
            std::process::exit(1);
        }
    };
    if args.lock == PurchaseLock::Leasehold {
        // The locker `#[distributed_lock]` uses when no `locker = ...` is given.
        leasehold::set_global_default(shop.locker.clone()).expect("installed once");
    }
    let locker = shop.locker.clone();
    let shop = web::Data::new(shop);
    let campaigner = shop.clone();
    let lock = args.lock;
    let server = HttpServer::new(move || {
        let app = App::new()
            .app_data(shop.clone())
            .service(show_stock)
            .service(ready);
        match lock {
            PurchaseLock::Leasehold => app.service(buy).service(restock).service(reserve),
            PurchaseLock::Off => app
                .service(buy_without_lock)
                .service(restock_without_lock)
                .service(reserve),
            PurchaseLock::ByHand => app
                .service(buy_under_raw_lock)
                .service(restock_without_lock),
        }
    })
    .shutdown_timeout(1)
    .bind(("127.0.0.1", args.port))?;
    let addr = server.addrs()[0];
    println!(
        "shop-actix listening on http://{addr} (lock: {})",
        lock.describe()
    );
    crate::shop::campaign(&campaigner, &args, format!("shop-actix@{}", addr.port()));
    // actix-web stops gracefully on SIGTERM and Ctrl-C by itself; then every lock (and a
    // leadership) is given back before the process exits.
    locker.close_after(server.run()).await
}
