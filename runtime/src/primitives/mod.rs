//! The public request and guard types, each a thin type over the engine: locks and their
//! guards, unfenced locks, multi-key locks, semaphores, leader election and inspection.

pub(crate) mod guard;
pub(crate) mod inspect;
pub(crate) mod leader;
pub(crate) mod multi;
pub(crate) mod profile;
pub(crate) mod request;
pub(crate) mod semaphore;
pub(crate) mod unfenced;
