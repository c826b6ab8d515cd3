//! The in-process semaphore: `tokio::sync::Semaphore` (fair: waiters are served in order).

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::scenarios::permits::{Permits, PERMITS};

/// Its name in the report.
pub(crate) const TOKIO_SEMAPHORE: &str = "tokio::sync::Semaphore";

#[derive(Clone)]
pub(crate) struct TokioPermits(Arc<Semaphore>);

impl TokioPermits {
    pub(crate) fn new() -> TokioPermits {
        TokioPermits(Arc::new(Semaphore::new(PERMITS as usize)))
    }
}

impl Permits for TokioPermits {
    type Permit = OwnedSemaphorePermit;

    async fn acquire(&self) -> OwnedSemaphorePermit {
        self.0.clone().acquire_owned().await.expect("open")
    }

    async fn release(&self, permit: OwnedSemaphorePermit) {
        drop(permit);
    }
}
