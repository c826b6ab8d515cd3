// `key` and `keys` are exclusive; the second one given is refused, naming both.
use leasehold::{distributed_lock, LockError};

#[distributed_lock(key = "wallet:<from>", keys = ["wallet:<from>", "wallet:<to>"])]
async fn transfer(from: u64, to: u64) -> Result<(), LockError> {
    let _ = (from, to);
    Ok(())
}

fn main() {}
