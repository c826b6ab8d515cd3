use leasehold::{distributed_lock, LockError};

#[distributed_lock(key = "stock:<shop>:<idd>")]
async fn buy(id: u64, shop: String) -> Result<u64, LockError> {
    let _ = shop;
    Ok(id)
}

fn main() {
    let _ = buy(1, String::new());
}
