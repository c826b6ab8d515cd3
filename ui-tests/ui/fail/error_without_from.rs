use leasehold::distributed_lock;

#[derive(Debug)]
struct ShopError;

#[distributed_lock(key = "order:<id>")]
async fn buy(id: u64) -> Result<u64, ShopError> {
    Ok(id)
}

fn main() {
    let _ = buy(1);
}
