//! `&self`, `&mut self` and `self` methods, `<self.field>` placeholders, `locker = self.field`,
//! and native async fns in traits.

#![deny(warnings)]

use leasehold::{distributed_lock, LockError, Locker};

struct Tenant {
    name: String,
    shard: (u8, u16),
}

struct Shop {
    locker: Locker,
    tenant: Tenant,
    sold: u64,
}

impl Shop {
    #[distributed_lock(key = "shop:<self.tenant.name>:<sku>", locker = self.locker)]
    async fn stock(&self, sku: &str) -> Result<u64, LockError> {
        let _ = sku;
        Ok(self.sold)
    }

    #[distributed_lock(key = "shop:<self.tenant.shard.1>", locker = self.locker, guard = lock)]
    async fn sell(&mut self, n: u64) -> Result<u64, LockError> {
        self.sold += n;
        let _ = lock.fence();
        Ok(self.sold)
    }

    #[distributed_lock(key = "shop:<self.tenant.name>:close", locker = self.locker)]
    async fn close(self) -> Result<Tenant, LockError> {
        Ok(self.tenant)
    }

    #[distributed_lock(key = "static:<name>")]
    async fn associated(name: &str) -> Result<usize, LockError> {
        Ok(name.len())
    }
}

trait Inventory {
    async fn restock(&self, sku: u32) -> Result<(), LockError>;

    fn locker(&self) -> &Locker;

    // A default method body: `Self` is unknown here, the locker comes from a trait method.
    #[distributed_lock(key = "audit:<day>", locker = self.locker())]
    async fn audit(&self, day: u16) -> Result<u16, LockError> {
        Ok(day)
    }
}

impl Inventory for Shop {
    #[distributed_lock(key = "restock:<self.tenant.name>:<sku>", locker = &self.locker)]
    async fn restock(&self, sku: u32) -> Result<(), LockError> {
        let _ = (sku, self.sold);
        Ok(())
    }

    fn locker(&self) -> &Locker {
        &self.locker
    }
}

fn assert_send<T: Send>(_: T) {}

#[allow(unreachable_code, unused_variables, clippy::diverging_sub_expression)]
pub(crate) fn main() {
    if false {
        let mut shop: Shop = unimplemented!();
        assert_send(shop.stock("a"));
        assert_send(shop.sell(1));
        assert_send(shop.restock(3));
        assert_send(shop.audit(3));
        assert_send(shop.close());
    }
    assert_send(Shop::associated("x"));
}
