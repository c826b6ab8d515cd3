// A foreign error type without `From<LockError>`, with the locker named by the attribute:
// one error per function, at its error type, and nothing pointing into leasehold's source.
use leasehold::{distributed_lock, Locker};

#[distributed_lock(key = "order:<id>", locker = locker)]
async fn by_ref(locker: &Locker, id: u64) -> Result<u32, String> {
    Ok(id as u32)
}

#[distributed_lock(key = "order:<id>", locker = locker, on_busy = "skip")]
async fn skipped(locker: Locker, id: u64) -> Result<Option<u32>, std::io::Error> {
    Ok(Some(id as u32))
}

#[distributed_lock(keys = ["a:<id>", "b:<id>"], locker = locker)]
async fn many(locker: &Locker, id: u64) -> Result<u32, String> {
    Ok(id as u32)
}

struct Shop {
    locker: Locker,
}

impl Shop {
    #[distributed_lock(key = "order:<id>", locker = self.locker, guard = held)]
    async fn method(&self, id: u64) -> Result<u64, String> {
        let fence: u64 = "1".parse().map_err(|_| "bad".to_string())?;
        Ok(id + fence + held.fence())
    }
}

fn main() {}
