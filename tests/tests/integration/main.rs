//! The library against real servers, one module per concept of the runtime: the core lock and
//! its kinds (unfenced, read-write, multi-key), the other primitives, the attribute and the web
//! integrations, configuration, observability, the engine's state, each engine's own behaviour,
//! and hostile input.
//! One test binary, so that the engine clients are linked once.
//!
//! The tests share one process: none installs a global default `Locker` (`macro_behaviour` and
//! `web` check the behaviour without one), and tracing subscribers go through `support`.

mod config;
mod dashboard;
mod engine_state;
mod engines;
mod fence_clients;
mod fenced_write;
mod holders;
mod hostile;
mod inspect;
mod leader;
mod lock_core;
mod macro_behaviour;
mod multi;
mod observability;
mod read_write;
mod safety_regressions;
mod semaphore;
mod singleton_job;
mod startup;
mod support;
mod unfenced;
mod web;
