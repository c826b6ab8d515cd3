use leasehold::{distributed_lock, LockError};

struct AppState {
    redis_url: String,
}

#[distributed_lock(key = "order:<id>", locker = state.redis_url)]
async fn buy(state: &AppState, id: u64) -> Result<u64, LockError> {
    Ok(id)
}

fn main() {
    let state = AppState { redis_url: String::new() };
    let _ = buy(&state, 1);
}
