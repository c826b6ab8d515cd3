//! Checks a holder makes in the resource it protects, in its own transaction, with its
//! guard's fence: they stand on the guards, beside the stores rather than inside them.

#[cfg(feature = "mysql")]
pub mod mysql;
#[cfg(feature = "postgres")]
pub mod postgres;
#[cfg(any(feature = "postgres", feature = "mysql"))]
mod verdict;
