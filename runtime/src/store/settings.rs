//! What every engine is given: its bounds, and the way to show an address without its
//! credentials.

use std::time::Duration;

/// The default session timeout of ZooKeeper sessions and etcd leases: 10 s.
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(10);

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

/// `text` with its `%XX` escapes decoded (a URL's user, password or parameter), for every
/// engine that reads credentials or options from a URL. The error names `what` was read, never
/// the text itself, which may be a password.
#[cfg_attr(
    not(any(feature = "zookeeper", feature = "etcd", feature = "postgres")),
    allow(dead_code)
)]
pub(crate) fn percent_decode(text: &str, what: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let byte = bytes
                .get(i + 1..i + 3)
                .and_then(|hex| std::str::from_utf8(hex).ok())
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
                .ok_or_else(|| format!("a `%` in {what} starts no %XX escape"))?;
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out)
        .map_err(|_| format!("{what} is not UTF-8 once its %XX escapes are decoded"))
}
