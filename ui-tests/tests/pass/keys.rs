//! `keys = [...]`: several locks at once, on axum (a `Send` handler future), with the
//! `&MultiGuard` bound by `guard`, fields in the keys, and the same key twice collapsing.

#![deny(warnings)]

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::routing::post;
use axum::Router;
use leasehold::{distributed_lock, LockError, Locker, MultiGuard};

struct Transfer {
    from: u64,
    to: u64,
}

#[distributed_lock(keys = ["wallet:<t.from>", "wallet:<t.to>"], guard = g, locker = locker)]
async fn transfer(locker: &Locker, t: Transfer) -> Result<Vec<u64>, LockError> {
    let g: &MultiGuard = g;
    Ok(g.guards().iter().map(|x| x.fence()).collect())
}

#[distributed_lock(keys = ["wallet:<from>", "wallet:<to>"], wait = "1s", locker = state)]
async fn route(
    State(state): State<Arc<Locker>>,
    Path((from, to)): Path<(u64, u64)>,
) -> Result<String, LockError> {
    Ok(format!("{from}->{to}"))
}

fn app(locker: Arc<Locker>) -> Router {
    Router::new()
        .route("/transfer/{from}/{to}", post(route))
        .with_state(locker)
}

#[tokio::main(flavor = "current_thread")]
pub(crate) async fn main() {
    let locker = Locker::in_memory();
    let fences = transfer(&locker, Transfer { from: 2, to: 1 }).await.unwrap();
    assert_eq!(fences.len(), 2);
    let fences = transfer(&locker, Transfer { from: 3, to: 3 }).await.unwrap();
    assert_eq!(fences.len(), 1);
    let _ = app(Arc::new(locker));
}
