//! The engine's tests, through the scripted store and Tokio's paused clock: the model of
//! one lock, read-write locks, semaphores, leader election and singleton jobs.

mod close;
mod job;
mod leader;
mod model;
mod outage;
mod read_write;
mod semaphore;
