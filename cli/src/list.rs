//! `leasehold list [PATTERN]`: the held locks whose keys match, as a table on stdout.

use leasehold::{LockInfo, Locker};

use crate::connect::Target;
use crate::display;
use crate::exit::{self, Failure};

/// The column titles of the table.
const HEADER: [&str; 6] = ["KEY", "REMAINING", "FENCE", "WAITERS", "LABEL", "HOLDER"];

/// Lists the held locks whose keys match `pattern` (on Redis found with SCAN).
///
/// # Errors
/// A [`Failure`] when the engine fails.
pub(crate) async fn run(locker: &Locker, target: &Target, pattern: &str) -> Result<u8, Failure> {
    let held = locker
        .list_held(pattern)
        .await
        .map_err(|e| target.failure(e))?;
    if held.is_empty() {
        // An answer, not an error; stdout stays empty for scripts.
        eprintln!(
            "no held locks match {:?} (prefix {:?}, {})",
            display::key(pattern),
            target.prefix,
            target.endpoint()
        );
    } else {
        print!("{}", table(&held, locker.capabilities().leases_expire));
    }
    Ok(exit::OK)
}

/// The table of held locks, one row each, in key order: who holds each one last (its cell
/// has spaces), its label before.
fn table(held: &[LockInfo], leases_expire: bool) -> String {
    let rows: Vec<Vec<String>> = held
        .iter()
        .map(|info| {
            vec![
                display::key(&info.key),
                display::remaining(info.held, info.remaining, leases_expire),
                display::fence(info.last_fence),
                display::yes_no(info.waiters).to_owned(),
                display::label(info.holder().and_then(|h| h.label.as_deref())),
                display::holders_cell(&info.holders),
            ]
        })
        .collect();
    display::table(&HEADER, &rows)
}
