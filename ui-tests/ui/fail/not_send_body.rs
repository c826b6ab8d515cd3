// The lock does not make a body `Send`: holding an `Rc` across an `.await` is reported as
// it would be without the attribute.
use std::rc::Rc;

use leasehold::{distributed_lock, LockError};

#[distributed_lock(key = "order:<id>")]
async fn buy(id: u64) -> Result<u64, LockError> {
    let rc = Rc::new(id);
    tokio::task::yield_now().await;
    Ok(*rc)
}

fn assert_send<T: Send>(_: T) {}

fn main() {
    assert_send(buy(1));
}
