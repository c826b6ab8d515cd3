use leasehold::distributed_lock;

#[distributed_lock(key = "order:<id>")]
async fn buy(id: u64) -> Option<u64> {
    Some(id)
}

fn main() {
    let _ = buy(1);
}
