use leasehold::{distributed_lock, LockError};

#[distributed_lock(lease = "10s")]
async fn buy(id: u64) -> Result<u64, LockError> {
    Ok(id)
}

fn main() {
    let _ = buy(1);
}
