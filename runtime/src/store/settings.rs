//! What every engine is given: its bounds, and the way to show an address without its
//! credentials.

use std::time::Duration;

/// How every engine connects and how long each call may take.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) op_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    /// The locker's id ([`Identity::id`](super::identity::Identity::id)): the name its
    /// process waits under in a store's queue of waiters.
    pub(crate) locker_id: String,
}

/// `scheme://***@host...` for a URL with credentials.
pub(crate) fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme_end), Some(at)) if at > scheme_end => {
            format!("{}***{}", &url[..scheme_end + 3], &url[at..])
        }
        (None, Some(at)) => format!("***{}", &url[at..]),
        _ => url.to_owned(),
    }
}
