//! What the resource's store accepted, read back after a run: each key's counter, and each
//! accepted write with what it was computed from.

use std::collections::BTreeMap;

use super::{postgres, redis, ResourceStore};

/// One write the store accepted, as the store recorded it with the write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredWrite {
    /// The lock key whose counter it wrote.
    pub key: String,
    /// The hold that wrote it (`worker.task.n`).
    pub hold: String,
    /// Its index among the hold's writes (from 0, as the hold's `win`s come).
    pub n: usize,
    /// The fence it was written with.
    pub fence: u64,
    /// The counter its writer read.
    pub read: i64,
    /// The counter it wrote.
    pub new: i64,
    /// Its place in the store's order of accepted writes, where the store numbers them
    /// (PostgreSQL: the log row's id); `None` on Redis, where the counters read give the order.
    pub order: Option<u64>,
}

/// Everything the resource's store holds after a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResourceRecords {
    /// Each key's counter as the store has it.
    pub values: BTreeMap<String, i64>,
    /// Every accepted write the store recorded.
    pub writes: Vec<StoredWrite>,
}

/// Reads the records of the resource at `url` (Redis or PostgreSQL, by its scheme). Blocking:
/// it runs on a thread of its own with a runtime of its own, so that a synchronous caller
/// inside a Tokio runtime (`Run::full_history`) can use it.
///
/// # Errors
/// A message when the URL names no store or the store cannot be read.
pub fn read_records(url: &str) -> Result<ResourceRecords, String> {
    let store = ResourceStore::of(url)?;
    let url = url.to_owned();
    let reading = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot build a runtime to read the resource: {e}"))?;
        runtime.block_on(async {
            let read = async {
                match store {
                    ResourceStore::Redis => redis::read(&url).await,
                    ResourceStore::Postgres => postgres::read(&url).await,
                }
            };
            tokio::time::timeout(std::time::Duration::from_secs(10), read)
                .await
                .map_err(|_| format!("the resource at {url} did not answer within 10 s"))?
        })
    });
    reading
        .join()
        .unwrap_or_else(|_| Err("reading the resource panicked".to_owned()))
}
