//! `leasehold release KEY --force`: deletes a lock whoever holds it, after saying plainly
//! what that does to the holder and, unless `--yes`, after the operator typed the key.

use std::io::{BufRead, Write};

use leasehold::{LockInfo, Locker};

use crate::connect::Target;
use crate::display;
use crate::exit::{self, Failure};

/// What force-releasing does to the holder, printed before anything is deleted.
const WARNING: &str = "\
Releasing deletes the lock whoever holds it, and the holder will NOT be told: it keeps \
running until its next lease renewal fails, and may write meanwhile; fenced resources reject \
its writes.";

/// Deletes the lock `key` if it is held: exit 0 when a lock was deleted, 1 when there was
/// none or the confirmation was not given.
///
/// # Errors
/// A [`Failure`] when the key is invalid or the engine fails.
pub(crate) async fn run(
    locker: &Locker,
    target: &Target,
    key: &str,
    yes: bool,
) -> Result<u8, Failure> {
    let shown = display::key(key);
    let leases_expire = locker.capabilities().leases_expire;
    let before = locker.inspect(key).await.map_err(|e| target.failure(e))?;
    if !before.held {
        println!("{shown} is not held; nothing deleted");
        return Ok(exit::NOTHING_DONE);
    }
    eprintln!("{shown} is held ({}).", state(&before, leases_expire));
    eprintln!("{WARNING}");
    if !yes {
        match confirm(key).await {
            Confirmation::Given => {}
            Confirmation::Mismatch => {
                eprintln!("the input is not the key; nothing deleted");
                return Ok(exit::NOTHING_DONE);
            }
            Confirmation::Closed => {
                eprintln!(
                    "no confirmation (stdin is closed); nothing deleted. Pass --yes to skip \
                     the confirmation"
                );
                return Ok(exit::NOTHING_DONE);
            }
        }
        // The operator took their time: do not delete a hold other than the one they saw.
        let now = locker.inspect(key).await.map_err(|e| target.failure(e))?;
        if !now.held || now.last_fence != before.last_fence {
            eprintln!(
                "{shown} changed hands while you were confirming (now {}); nothing deleted. \
                 Run the command again to see the new holder",
                if now.held {
                    state(&now, leases_expire)
                } else {
                    "free".to_owned()
                }
            );
            return Ok(exit::NOTHING_DONE);
        }
    }
    if locker
        .force_release(key)
        .await
        .map_err(|e| target.failure(e))?
    {
        println!("deleted the lock on {shown}; waiters, if any, were woken");
        Ok(exit::OK)
    } else {
        println!("{shown} was no longer held; nothing deleted");
        Ok(exit::NOTHING_DONE)
    }
}

/// `fence 42, 8.1s left, with waiters`.
fn state(info: &LockInfo, leases_expire: bool) -> String {
    let mut s = format!(
        "fence {}, {} left",
        display::fence(info.last_fence),
        display::remaining(info.held, info.remaining, leases_expire)
    );
    if info.waiters {
        s.push_str(", with waiters");
    }
    s
}

/// What the operator answered.
enum Confirmation {
    /// They typed the key.
    Given,
    /// They typed something else.
    Mismatch,
    /// Stdin ended (or failed) before a line.
    Closed,
}

/// Asks for the key on stdin. Reading blocks, so it runs off the async thread, where the
/// locker's connection tasks keep running.
async fn confirm(key: &str) -> Confirmation {
    eprint!("type the key to confirm: ");
    let _ = std::io::stderr().flush();
    let line = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        match std::io::stdin().lock().read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line),
        }
    })
    .await
    .ok()
    .flatten();
    match line {
        None => {
            eprintln!();
            Confirmation::Closed
        }
        Some(line) => {
            let typed = line.strip_suffix('\n').unwrap_or(&line);
            let typed = typed.strip_suffix('\r').unwrap_or(typed);
            if typed == key {
                Confirmation::Given
            } else {
                Confirmation::Mismatch
            }
        }
    }
}
