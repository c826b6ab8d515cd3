//! What `leasehold top` was asked to show, and how.

use std::time::Duration;

use super::Sort;

/// The default `--interval` of `top`.
pub(crate) const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);

/// `top [PATTERN] [--interval DUR] [--sort ORDER] [--plain] [--once | --count N]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Options {
    /// The glob over keys; `*` by default.
    pub(crate) pattern: String,
    /// How often to read the locks. Defaults to 1 s.
    pub(crate) interval: Duration,
    /// The order of the rows, until a key on the screen changes it. Defaults to age.
    pub(crate) sort: Sort,
    /// Plain tables even on a terminal (`--plain`, or implied by a count).
    pub(crate) plain: bool,
    /// How many readings to print before exiting (`--once` is 1); `None`: until stopped.
    pub(crate) count: Option<u64>,
}
