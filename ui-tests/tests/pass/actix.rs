//! actix-web route attributes above and below `#[distributed_lock]`, with extractors
//! (and their tuple fields) in the key and the locker taken from `web::Data`.

#![deny(warnings)]

use std::fmt;

use actix_web::{get, post, web, App, HttpResponse, ResponseError};
use leasehold::{distributed_lock, LockError, Locker};

struct Shop {
    locker: Locker,
}

#[derive(Debug)]
struct ShopError(LockError);

impl fmt::Display for ShopError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl ResponseError for ShopError {}

impl From<LockError> for ShopError {
    fn from(e: LockError) -> Self {
        ShopError(e)
    }
}

#[post("/orders/{sku}")]
#[distributed_lock(key = "stock:<sku>", lease = "10s", wait = "2s", locker = shop.locker)]
async fn buy(sku: web::Path<String>, shop: web::Data<Shop>) -> Result<HttpResponse, ShopError> {
    let _ = &shop;
    Ok(HttpResponse::Ok().body(sku.into_inner()))
}

// actix-web 4 has no `web::Path((a, b))` pattern (the field is private): name the tuple's
// fields on the extractor instead.
#[distributed_lock(key = "stock:<path.0>/<path.1>", locker = shop.locker)]
#[get("/stock/{shop_id}/{sku}")]
async fn stock(
    path: web::Path<(String, String)>,
    shop: web::Data<Shop>,
) -> Result<String, ShopError> {
    let _ = &shop;
    let (shop_id, sku) = path.into_inner();
    Ok(format!("{shop_id}/{sku}"))
}

#[post("/pairs/{a}/{b}")]
#[distributed_lock(key = "pair:<path.0>:<path.1>", locker = shop.locker, guard = lock)]
async fn pair(path: web::Path<(u32, u32)>, shop: web::Data<Shop>) -> Result<String, ShopError> {
    let _ = &shop;
    Ok(format!("{}:{}:{}", path.0, path.1, lock.fence()))
}

#[distributed_lock(key = "plain:<id>")]
async fn registered_by_hand(id: web::Path<u64>) -> Result<String, ShopError> {
    Ok(id.to_string())
}

pub(crate) fn main() {
    let _app = App::new()
        .service(buy)
        .service(stock)
        .service(pair)
        .route("/plain/{id}", web::get().to(registered_by_hand));
}
