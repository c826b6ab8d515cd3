//! `leasehold show KEY`: one lock's state, one `name: value` line per field.

use leasehold::{LockInfo, Locker};

use crate::connect::Target;
use crate::display;
use crate::exit::{self, Failure};

/// Prints the state of the lock `key`; a free lock is an answer too (exit 0).
///
/// # Errors
/// A [`Failure`] when the key is invalid or the engine fails.
pub(crate) async fn run(locker: &Locker, target: &Target, key: &str) -> Result<u8, Failure> {
    let info = locker.inspect(key).await.map_err(|e| target.failure(e))?;
    print!("{}", describe(&info, locker.capabilities().leases_expire));
    Ok(exit::OK)
}

/// The lines that `show` prints: the lock's state, then who holds it and who waits.
fn describe(info: &LockInfo, leases_expire: bool) -> String {
    let state = format!(
        "key:         {}\n\
         state:       {}\n\
         remaining:   {}\n\
         last fence:  {}\n\
         waiters:     {}\n\
         queued:      {}\n",
        display::key(&info.key),
        if info.held { "held" } else { "free" },
        display::remaining(info.held, info.remaining, leases_expire),
        display::fence(info.last_fence),
        display::yes_no(info.waiters),
        info.waiting_processes,
    );
    let who =
        display::holders_and_waiters(&info.holders, &info.waiting, std::time::SystemTime::now());
    state + &who
}
