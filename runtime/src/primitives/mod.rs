//! The public request and guard types, each a thin type over the core: locks and their
//! guards, unfenced locks, multi-key locks, semaphores, leader election, and the named
//! profiles requests may use.

pub(crate) mod guard;
pub(crate) mod leader;
pub(crate) mod leader_status;
pub(crate) mod multi;
pub(crate) mod profile;
pub(crate) mod request;
pub(crate) mod semaphore;
pub(crate) mod unfenced;
