//! Free functions with every option, the default locker, and `Result` aliases.

#![deny(warnings)]

use leasehold::{distributed_lock, LockError};

#[derive(Debug)]
#[allow(dead_code)] // the payload is only for `Debug`
enum ShopError {
    Lock(LockError),
    SoldOut,
}

impl From<LockError> for ShopError {
    fn from(e: LockError) -> Self {
        ShopError::Lock(e)
    }
}

type ShopResult<T> = Result<T, ShopError>;

/// Docs and other attributes stay on the function.
#[distributed_lock(key = "order:<id>")]
#[inline]
pub async fn place_order(id: u64) -> Result<u64, ShopError> {
    #![allow(unused_mut)]
    let mut total = id * 2;
    if total == 0 {
        return Err(ShopError::SoldOut);
    }
    Ok(total)
}

#[rustfmt::skip] // keeps the trailing comma in the options, which must parse
#[distributed_lock(
    key = "stock:<sku>",
    lease = "30s",
    wait = "3s",
    watchdog = true,
    on_lost = "cancel",
    crate = "::leasehold",
)]
async fn every_option(sku: String) -> ShopResult<String> {
    Ok(sku)
}

#[distributed_lock(
    key = "nightly-report",
    lease = "1h 30m",
    wait = "0s",
    watchdog = false,
    on_lost = "continue"
)]
pub(crate) async fn fixed_key() -> Result<(), LockError> {
    Ok(())
}

#[distributed_lock(key = "a{b}}c:<<literal>>:<n>", lease = "500ms", wait = "2m")]
async fn escapes(n: i32) -> Result<(), LockError> {
    let _ = n;
    Ok(())
}

#[distributed_lock(key = "unit")]
async fn unit_ok() -> Result<(), LockError> {
    Ok(())
}

fn assert_send<T: Send>(_: T) {}

pub(crate) fn main() {
    assert_send(place_order(1));
    assert_send(every_option("sku".into()));
    assert_send(fixed_key());
    assert_send(escapes(1));
    assert_send(unit_ok());
}
