//! `leasehold semaphore KEY`: a semaphore's limit and permits in use, then its holders as a
//! table (permits, remaining lease), the soonest lease to end first. Never owner tokens.

use leasehold::{Locker, SemaphoreInfo};

use crate::connect::Target;
use crate::display;
use crate::exit::{self, Failure};

/// The column titles of the holders' table.
const HEADER: [&str; 3] = ["HOLDER", "PERMITS", "REMAINING"];

/// Prints the holders of the semaphore `key`; one nobody holds is an answer too (exit 0).
///
/// # Errors
/// A [`Failure`] when the key is invalid, the engine has no semaphores, or it fails.
pub(crate) async fn run(locker: &Locker, target: &Target, key: &str) -> Result<u8, Failure> {
    let info = locker
        .inspect_semaphore(key)
        .await
        .map_err(|e| target.failure(e))?;
    print!("{}", describe(&info));
    Ok(exit::OK)
}

/// What `semaphore` prints: a header of `name: value` lines, then the holders' table.
fn describe(info: &SemaphoreInfo) -> String {
    let mut out = format!(
        "key:      {}\n\
         limit:    {}\n\
         in use:   {}\n",
        display::key(&info.key),
        info.limit
            .map_or_else(|| "- (no permit held)".to_owned(), |l| l.to_string()),
        info.in_use(),
    );
    if !info.holders.is_empty() {
        let rows: Vec<Vec<String>> = info
            .holders
            .iter()
            .enumerate()
            .map(|(i, h)| {
                vec![
                    (i + 1).to_string(),
                    h.permits.to_string(),
                    display::lease(h.remaining),
                ]
            })
            .collect();
        out.push('\n');
        out.push_str(&display::table(&HEADER, &rows));
    }
    out
}
