//! Named profiles: a lock's settings (lease, wait, watchdog, fairness, a semaphore's limit)
//! kept in configuration, which a request, an attribute (`profile = "payments"`) or a route
//! rule names instead of writing literals. A profile's settings override the call's own,
//! which stay the defaults for what the profile leaves unset: applied where a request names
//! it ([`LockRequest::profile`](crate::LockRequest::profile)), checked where every primitive
//! resolves its options.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::error::LockError;
use crate::store::kind::LeaseKind;

/// The settings of a named profile (see [`LockerBuilder::profile`](crate::LockerBuilder::profile)
/// and the `[profiles.NAME]` tables of [`LockConfig`](crate::LockConfig)). Every field is
/// optional: what a profile sets overrides the call site's own setting, and what it leaves
/// unset keeps the call site's (or the locker's default).
///
/// ```
/// use leasehold::{Locker, Profile};
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), leasehold::LockError> {
/// let locker = Locker::builder()
///     .profile("payments", Profile::new().lease(Duration::from_secs(45)).wait(Duration::ZERO))
///     .build_in_memory()?;
/// let held = locker.lock("payout:7").profile("payments").acquire().await?;
/// assert!(locker.lock("payout:7").profile("payments").acquire().await.is_err()); // no wait
/// # drop(held);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Profile {
    /// The lease.
    pub lease: Option<Duration>,
    /// The wait for a busy lock.
    pub wait: Option<Duration>,
    /// Whether the watchdog renews the lease.
    pub watchdog: Option<bool>,
    /// First come, first served across processes.
    pub fair: Option<bool>,
    /// A semaphore's number of permits (its limit); for other primitives an error.
    pub limit: Option<u32>,
}

impl Profile {
    /// A profile that sets nothing yet.
    pub fn new() -> Profile {
        Profile::default()
    }

    /// Sets the lease.
    pub fn lease(mut self, lease: Duration) -> Profile {
        self.lease = Some(lease);
        self
    }

    /// Sets the wait for a busy lock.
    pub fn wait(mut self, wait: Duration) -> Profile {
        self.wait = Some(wait);
        self
    }

    /// Sets whether the watchdog renews the lease.
    pub fn watchdog(mut self, on: bool) -> Profile {
        self.watchdog = Some(on);
        self
    }

    /// Sets fairness.
    pub fn fair(mut self, on: bool) -> Profile {
        self.fair = Some(on);
        self
    }

    /// Sets a semaphore's limit.
    pub fn limit(mut self, permits: u32) -> Profile {
        self.limit = Some(permits);
        self
    }
}

/// A locker's profiles by name.
pub(crate) type Profiles = BTreeMap<String, Profile>;

impl Profile {
    /// Checks its settings, for the builder; `name` is its name in messages.
    pub(crate) fn check(&self, name: &str) -> Result<(), LockError> {
        if name.is_empty() || name.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(LockError::config(format!(
                "profile name {name:?} is not a name: use letters, digits, `-` or `_`, e.g. \
                 \"payments\""
            )));
        }
        if let Some(lease) = self.lease {
            crate::kernel::options::check_lease(lease, &format!("profile {name:?}: lease"))?;
        }
        if let Some(limit) = self.limit {
            crate::kernel::options::check_permits(limit, 1)
                .map_err(|e| LockError::config(format!("profile {name:?}: limit: {e}")))?;
        }
        Ok(())
    }
}

/// The profile `name` of `profiles`, or the `Config` error that names the ones there are.
pub(crate) fn find<'p>(profiles: &'p Profiles, name: &str) -> Result<&'p Profile, LockError> {
    profiles.get(name).ok_or_else(|| {
        let known: Vec<&str> = profiles.keys().map(String::as_str).collect();
        LockError::config(format!(
            "profile {name:?} is not defined for this locker (it has {}); add \
             [profiles.{name}] to the config, or LockerBuilder::profile({name:?}, ...)",
            if known.is_empty() {
                "none".to_owned()
            } else {
                format!("{known:?}")
            }
        ))
    })
}

/// The error for a profile that sets a semaphore's limit, named by a request for a lease of
/// another kind.
pub(crate) fn limit_on_a_lock(name: &str, limit: u32, kind: LeaseKind) -> LockError {
    let what = match kind {
        LeaseKind::Read => "a read lock",
        _ => "a lock",
    };
    LockError::config(format!(
        "profile {name:?} sets limit = {limit}, a semaphore's number of permits, but is used \
         for {what}; remove limit from the profile, or use the profile with a semaphore"
    ))
}
