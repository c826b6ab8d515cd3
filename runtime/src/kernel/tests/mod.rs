//! The engine's tests, through the scripted store and Tokio's paused clock: the model of
//! one lock, read-write locks, semaphores, leader election, singleton jobs and the engine's
//! health.

mod close;
mod health;
mod job;
mod leader;
mod matrix;
mod model;
mod outage;
mod read_write;
mod semaphore;
mod vouched;
