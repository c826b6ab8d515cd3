//! `mode = "read"`: the read side of a read-write lock; readers share. `mode = "write"` is
//! the plain exclusive lock, and a read inside its body is a downgrade (a hold of its own,
//! held on past the body). `fair = true` too.

#![deny(warnings)]

use leasehold::{distributed_lock, LockError, Locker};

#[distributed_lock(key = "doc:<id>", mode = "read", locker = locker, guard = g)]
async fn read(locker: &Locker, id: u64) -> Result<u64, LockError> {
    // A second reader of the same document gets in while this one holds.
    let other = locker.read_lock(format!("doc:{id}")).try_acquire().await?;
    assert!(other.is_some());
    Ok(g.fence())
}

#[distributed_lock(key = "doc:<id>", mode = "write", locker = locker)]
async fn write(locker: &Locker, id: u64) -> Result<(), LockError> {
    let read = locker.read_lock(format!("doc:{id}")).acquire().await?;
    assert!(!read.is_reentrant() && read.is_held());
    Ok(())
}

#[distributed_lock(key = "queue:<id>", fair = true, locker = locker)]
async fn fair(locker: &Locker, id: u64) -> Result<u64, LockError> {
    Ok(id)
}

#[tokio::main(flavor = "current_thread")]
pub(crate) async fn main() {
    let locker = Locker::in_memory();
    assert!(read(&locker, 1).await.unwrap() >= 1);
    write(&locker, 1).await.unwrap();
    assert_eq!(fair(&locker, 3).await.unwrap(), 3);
}
