//! `profile = "..."`: the locker's named settings override the attribute's literals (here a
//! semaphore's limit), and `Locker::check_call_sites` finds every call site of the program.

#![deny(warnings)]

use leasehold::{distributed_lock, LockError, Locker, Profile};

#[distributed_lock(key = "partner-api", permits = 8, profile = "partner", locker = locker, guard = g)]
async fn call_partner(locker: &Locker) -> Result<u32, LockError> {
    Ok(g.limit())
}

#[distributed_lock(keys = ["a:<id>", "b:<id>"], profile = "partner-keys", locker = locker)]
async fn both(locker: &Locker, id: u8) -> Result<u8, LockError> {
    Ok(id)
}

#[tokio::main(flavor = "current_thread")]
pub(crate) async fn main() {
    let bare = Locker::in_memory();
    let err = bare.check_call_sites().unwrap_err().to_string();
    assert!(err.contains("call_partner") && err.contains("both"), "{err}");
    let locker = Locker::builder()
        .profile("partner", Profile::new().limit(2))
        .profile("partner-keys", Profile::new().wait(std::time::Duration::ZERO))
        .build_in_memory()
        .unwrap();
    locker.check_call_sites().unwrap();
    assert_eq!(call_partner(&locker).await.unwrap(), 2);
    assert_eq!(both(&locker, 3).await.unwrap(), 3);
}
