//! The engine's health as a signal ([`Locker::state`](crate::Locker::state)): one state
//! machine, written once for every engine, fed by what the locker sees anyway (its calls'
//! outcomes, its watchdog's renewals, its session's epochs) and by what an engine knows more.

mod calls;
mod machine;
mod monitor;
mod shared;
mod state;

pub(crate) use calls::Calls;
pub(crate) use monitor::spawn;
pub(crate) use shared::Health;
pub use state::{EngineState, EngineStates};
