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

/// The profile `name` of `profiles`, or the `Config` error that names the ones there are
/// and the close matches among them.
pub(crate) fn find<'p>(profiles: &'p Profiles, name: &str) -> Result<&'p Profile, LockError> {
    profiles
        .get(name)
        .ok_or_else(|| LockError::config(undefined(profiles, name)))
}

/// What is wrong with naming the profile `name`, which `profiles` lacks, and what to do.
pub(crate) fn undefined(profiles: &Profiles, name: &str) -> String {
    let known: Vec<&str> = profiles.keys().map(String::as_str).collect();
    let close = close_matches(name, known.iter().copied());
    format!(
        "profile {name:?} is not defined for this locker (it has {}); {}add [profiles.{name}] \
         to the config, or LockerBuilder::profile({name:?}, ...)",
        if known.is_empty() {
            "none".to_owned()
        } else {
            format!("{known:?}")
        },
        match close.as_slice() {
            [] => String::new(),
            [one] => format!("did you mean {one:?}? or "),
            several => format!("did you mean one of {several:?}? or "),
        }
    )
}

/// The names among `candidates` close to `name` (a typo away: a few letters added, dropped,
/// changed or case changed), closest first.
pub(crate) fn close_matches<'c>(
    name: &str,
    candidates: impl IntoIterator<Item = &'c str>,
) -> Vec<&'c str> {
    let name_lower = name.to_lowercase();
    // A third of the name's letters, at least one and at most three.
    let bound = (name.chars().count() / 3).clamp(1, 3);
    let mut close: Vec<(usize, &str)> = candidates
        .into_iter()
        .filter_map(|candidate| {
            let d = edit_distance(&name_lower, &candidate.to_lowercase());
            (d <= bound).then_some((d, candidate))
        })
        .collect();
    close.sort();
    close.into_iter().map(|(_, c)| c).collect()
}

/// The number of single-letter insertions, deletions and substitutions that turn `a` into
/// `b` (Levenshtein's distance), by the two-row table.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        current[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Locker;

    #[test]
    fn close_matches_are_a_typo_away_closest_first() {
        let known = ["expiry-worker", "payments", "partner-api", "export"];
        assert_eq!(close_matches("expiry_worker", known), ["expiry-worker"]);
        assert_eq!(close_matches("Payments", known), ["payments"]);
        assert_eq!(close_matches("payment", known), ["payments"]);
        assert!(close_matches("scheduler", known).is_empty());
        // Short names allow one letter only.
        assert_eq!(close_matches("expor", known), ["export"]);
        assert!(close_matches("ab", ["xy"]).is_empty());
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
    }

    #[tokio::test]
    async fn check_profiles_names_every_missing_one_with_its_close_matches() {
        let locker = Locker::builder()
            .profile(
                "expiry-worker",
                Profile::new().lease(Duration::from_secs(10)),
            )
            .profile("payments", Profile::new().wait(Duration::ZERO))
            .build_in_memory()
            .unwrap();
        locker
            .check_profiles(["payments", "expiry-worker"])
            .unwrap();
        locker.check_profiles(Vec::<String>::new()).unwrap();
        let err = locker
            .check_profiles(["expiry_worker", "payments", "scheduler", "scheduler"])
            .unwrap_err();
        assert!(matches!(err, LockError::Config { .. }), "{err:?}");
        let text = err.to_string();
        assert!(
            text.contains("2 profiles the program names are not defined"),
            "{text}"
        );
        assert!(
            text.contains("profile \"expiry_worker\" is not defined for this locker (it has [\"expiry-worker\", \"payments\"]); did you mean \"expiry-worker\"?"),
            "{text}"
        );
        assert!(
            text.contains("profile \"scheduler\" is not defined"),
            "{text}"
        );
        assert_eq!(text.matches("\"scheduler\" is not").count(), 1, "{text}");
        assert!(!text.contains("\"payments\" is not"), "{text}");

        let names: Vec<&str> = locker.profiles().map(|(n, _)| n).collect();
        assert_eq!(names, ["expiry-worker", "payments"]);
        assert!(locker.profile("scheduler").is_none());
    }

    /// The error a request meets at run time names the close matches too.
    #[tokio::test]
    async fn a_request_naming_a_misspelt_profile_is_told_the_close_match() {
        let locker = Locker::builder()
            .profile("expiry-worker", Profile::new())
            .build_in_memory()
            .unwrap();
        let err = locker
            .leader("expiry")
            .profile("expiry-wroker")
            .campaign()
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("did you mean \"expiry-worker\"?"),
            "{err}"
        );
    }
}
