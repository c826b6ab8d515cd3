//! A locker's named profiles, for the program: listed, and checked at start-up against the
//! names its plain requests use.

use crate::error::LockError;
use crate::locker::Locker;
use crate::primitives::profile::{undefined, Profile};

impl Locker {
    /// The locker's named profiles, by name in alphabetical order: those of the builder
    /// ([`LockerBuilder::profile`](crate::LockerBuilder::profile)) and of the config's
    /// `[profiles.NAME]` tables. For a start-up log line or a status page.
    ///
    /// ```
    /// use leasehold::{Locker, Profile};
    /// use std::time::Duration;
    ///
    /// let locker = Locker::builder()
    ///     .profile("payments", Profile::new().wait(Duration::ZERO))
    ///     .profile("expiry-worker", Profile::new().lease(Duration::from_secs(10)))
    ///     .build_in_memory()?;
    /// let names: Vec<&str> = locker.profiles().map(|(name, _)| name).collect();
    /// assert_eq!(names, ["expiry-worker", "payments"]);
    /// assert_eq!(locker.profile("payments").unwrap().wait, Some(Duration::ZERO));
    /// # Ok::<(), leasehold::LockError>(())
    /// ```
    pub fn profiles(&self) -> impl Iterator<Item = (&str, &Profile)> {
        self.profiles.iter().map(|(name, p)| (name.as_str(), p))
    }

    /// The profile `name`, if the locker defines it.
    pub fn profile(&self, name: &str) -> Option<&Profile> {
        self.profiles.get(name)
    }

    /// Checks, at start-up, that the locker defines every profile the program names in its
    /// plain requests ([`LockRequest::profile`](crate::LockRequest::profile), a semaphore's,
    /// a campaign's, [`lock_all`](crate::Locker::lock_all)'s): a profile name misspelt in
    /// code or missing from the config is then an error before the first request, as an
    /// attribute's is ([`check_call_sites`](Self::check_call_sites)), instead of a request
    /// that fails every time (or a leader-only worker that never runs). Name every profile
    /// your code passes to `.profile(...)`.
    ///
    /// # Errors
    /// [`LockError::Config`] naming every profile the locker lacks, each with the profiles
    /// it has and the close matches among them (`did you mean "expiry-worker"?`).
    ///
    /// ```
    /// use leasehold::{Locker, Profile};
    /// use std::time::Duration;
    ///
    /// const EXPIRY_WORKER: &str = "expiry-worker";
    /// let locker = Locker::builder()
    ///     .profile("expiry-worker", Profile::new().lease(Duration::from_secs(10)))
    ///     .build_in_memory()?;
    /// locker.check_profiles([EXPIRY_WORKER])?;
    ///
    /// let err = locker.check_profiles(["expiry_worker"]).unwrap_err().to_string();
    /// assert!(err.contains("did you mean \"expiry-worker\"?"), "{err}");
    /// # Ok::<(), leasehold::LockError>(())
    /// ```
    pub fn check_profiles<I, S>(&self, names: I) -> Result<(), LockError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut missing: Vec<String> = Vec::new();
        for name in names {
            let name = name.as_ref();
            if !self.profiles.contains_key(name) {
                let line = format!("  - {}", undefined(&self.profiles, name));
                if !missing.contains(&line) {
                    missing.push(line);
                }
            }
        }
        match missing.len() {
            0 => Ok(()),
            n => Err(LockError::config(format!(
                "{n} profile{} the program names {} not defined for this locker ({}):\n{}",
                if n == 1 { "" } else { "s" },
                if n == 1 { "is" } else { "are" },
                self.inner.store.describe(),
                missing.join("\n")
            ))),
        }
    }
}
