//! `#[tracing::instrument]` above and below `#[distributed_lock]`, on functions and methods.

#![deny(warnings)]

use std::future::Future;

use leasehold::{distributed_lock, LockError, Locker};

#[tracing::instrument(skip(locker), err)]
#[distributed_lock(key = "order:<id>", locker = locker)]
async fn above(locker: &Locker, id: u64) -> Result<u64, LockError> {
    tracing::info!("placing");
    Ok(id)
}

#[distributed_lock(key = "order:<id>", locker = locker, guard = lock)]
#[tracing::instrument(skip(locker), fields(order = id), ret, err(Debug))]
async fn below(locker: &Locker, id: u64) -> Result<u64, LockError> {
    tracing::info!(fence = lock.fence(), "placing");
    Ok(id)
}

struct Shop {
    locker: Locker,
    name: String,
}

impl Shop {
    #[tracing::instrument(skip(self), fields(shop = %self.name))]
    #[distributed_lock(key = "shop:<self.name>:<sku>", locker = self.locker)]
    async fn sell(&self, sku: u32) -> Result<u32, LockError> {
        Ok(sku)
    }

    #[distributed_lock(key = "shop:<self.name>", locker = self.locker)]
    #[tracing::instrument(skip_all)]
    async fn restock(&mut self) -> Result<(), LockError> {
        self.name.push('!');
        Ok(())
    }
}

fn is_send<T: Future + Send>(_: T) {}

#[allow(unreachable_code, unused_variables, clippy::diverging_sub_expression)]
pub(crate) fn main() {
    if false {
        let locker: Locker = unimplemented!();
        is_send(above(&locker, 1));
        is_send(below(&locker, 1));
        let mut shop: Shop = unimplemented!();
        is_send(shop.sell(1));
        is_send(shop.restock());
    }
}
