use leasehold::distributed_lock;

#[distributed_lock(key = "order:<id>")]
async fn buy(id: u64) {
    let _ = id;
}

fn main() {
    let _ = buy(1);
}
