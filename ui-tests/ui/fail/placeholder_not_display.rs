use leasehold::{distributed_lock, LockError};

struct OrderId(u64);

#[distributed_lock(key = "order:<id>")]
async fn buy(id: OrderId) -> Result<u64, LockError> {
    Ok(id.0)
}

fn main() {
    let _ = buy(OrderId(1));
}
