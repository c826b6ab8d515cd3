//! The resource on PostgreSQL: a row per key in `resource_counters` (counter, balance, and the
//! `fence` column of the old fenced write), a row per accepted write in `resource_writes`
//! (its id the store's order), and the library's `leasehold_claims` for claims.

use std::collections::BTreeMap;
use std::time::Duration;

use leasehold::postgres::tokio_postgres::{Client, GenericClient};
use leasehold::postgres::{claim_fence, claim_with_fence, CLAIMS_SCHEMA};
use leasehold::LockError;

use super::client::{FenceOf, Update};
use super::records::{ResourceRecords, StoredWrite};
use super::{parse_write_id, Fencing};

/// The resource's tables; created once by the first worker that connects (under an advisory
/// lock: concurrent `CREATE TABLE IF NOT EXISTS` can fail on PostgreSQL's catalog).
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS resource_counters (
    key text PRIMARY KEY,
    value bigint NOT NULL DEFAULT 0,
    balance bigint NOT NULL DEFAULT 0,
    fence bigint NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS resource_writes (
    id bigserial PRIMARY KEY,
    key text NOT NULL,
    write text NOT NULL,
    fence bigint NOT NULL,
    read bigint NOT NULL,
    new bigint NOT NULL
);
";

/// The write under claims: each written key's counter and balance, and its record, in one
/// statement of the claiming transaction. `$6` is the write's name (a test's trap holds the
/// statement by it).
const WRITE_CLAIMED: &str = "
WITH w AS (
    SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[])
        AS w(key, fence, read, new, balance)
), updated AS (
    UPDATE resource_counters c SET value = w.new, balance = w.balance
    FROM w WHERE c.key = w.key
    RETURNING c.key
)
INSERT INTO resource_writes (key, write, fence, read, new)
SELECT w.key, $6, w.fence, w.read, w.new FROM w JOIN updated USING (key)";

/// The README's old fenced write, `UPDATE … SET value = $v, fence = $f WHERE key = $k AND
/// fence <= $f`, with its record inserted by the same statement: one statement in autocommit,
/// applied whenever it reaches the server, however late.
const WRITE_IF_NEWER: &str = "
WITH updated AS (
    UPDATE resource_counters SET value = $2, fence = $3 WHERE key = $1 AND fence <= $3
    RETURNING key
)
INSERT INTO resource_writes (key, write, fence, read, new)
SELECT key, $4, $3, $5, $2 FROM updated";

/// One worker task's connection to the resource on PostgreSQL (a transaction needs a
/// connection of its own).
pub struct PgResource {
    client: Client,
    url: String,
    idle: Duration,
    fencing: Fencing,
    compute: Duration,
}

fn bigint(fence: u64) -> Result<i64, String> {
    i64::try_from(fence).map_err(|_| format!("fence {fence} does not fit a bigint"))
}

fn failed(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Opens a client the locker's way, bounded (the URL may carry no `connect_timeout`).
async fn connect(url: &str) -> Result<Client, String> {
    tokio::time::timeout(Duration::from_secs(10), leasehold::postgres::connect(url))
        .await
        .map_err(|_| format!("PostgreSQL at {url} did not answer within 10 s"))?
        .map_err(failed)
}

/// A session for a worker: one whose transaction waits for its client longer than `idle` is
/// ended by the server.
async fn open(url: &str, idle: Duration) -> Result<Client, String> {
    let client = connect(url).await?;
    client
        .batch_execute(&format!(
            "SET idle_in_transaction_session_timeout = '{}ms'",
            idle.as_millis()
        ))
        .await
        .map_err(failed)?;
    Ok(client)
}

/// `(value, balance)` of each of `keys`, in their order.
async fn read_rows(client: &impl GenericClient, keys: &[&str]) -> Result<Vec<(i64, i64)>, String> {
    let names: Vec<String> = keys.iter().map(|k| (*k).to_owned()).collect();
    let rows = client
        .query(
            "SELECT key, value, balance FROM resource_counters WHERE key = ANY($1)",
            &[&names],
        )
        .await
        .map_err(failed)?;
    let found: BTreeMap<String, (i64, i64)> = rows
        .iter()
        .map(|r| (r.get(0), (r.get(1), r.get(2))))
        .collect();
    keys.iter()
        .map(|k| {
            found
                .get(*k)
                .copied()
                .ok_or_else(|| format!("resource_counters has no row for `{k}`"))
        })
        .collect()
}

impl PgResource {
    pub(super) async fn connect(
        url: &str,
        fencing: Fencing,
        compute: Duration,
        keys: &[String],
        lease: Duration,
    ) -> Result<Self, String> {
        let idle = lease + Duration::from_secs(5);
        let mut client = open(url, idle).await?;
        let tx = client.transaction().await.map_err(failed)?;
        tx.batch_execute("SELECT pg_advisory_xact_lock(4404)")
            .await
            .map_err(failed)?;
        tx.batch_execute(SCHEMA).await.map_err(failed)?;
        tx.batch_execute(CLAIMS_SCHEMA).await.map_err(failed)?;
        tx.execute(
            "INSERT INTO resource_counters (key) SELECT unnest($1::text[]) ON CONFLICT DO NOTHING",
            &[&keys],
        )
        .await
        .map_err(failed)?;
        tx.commit().await.map_err(failed)?;
        Ok(PgResource {
            client,
            url: url.to_owned(),
            idle,
            fencing,
            compute,
        })
    }

    pub(super) async fn update(
        &mut self,
        update: &Update<'_>,
        on_read: impl FnOnce(&[i64]),
    ) -> Result<bool, String> {
        if self.client.is_closed() {
            // The server ended the session (a transaction idle past its bound): a new one.
            self.client = open(&self.url, self.idle).await?;
        }
        match self.fencing {
            Fencing::Claim => self.claim_and_write(update, on_read).await,
            Fencing::WriteOnly => self.read_then_write(update, on_read).await,
        }
    }

    /// One transaction: every key claimed first (in key order, so that two holders never
    /// wait on each other's claims), then the read, the compute and the write; refused
    /// claims roll it back.
    async fn claim_and_write(
        &mut self,
        update: &Update<'_>,
        on_read: impl FnOnce(&[i64]),
    ) -> Result<bool, String> {
        let tx = self.client.transaction().await.map_err(failed)?;
        let mut claims: Vec<&(&str, FenceOf<'_>)> = update.keys.iter().collect();
        claims.sort_by_key(|(key, _)| *key);
        for &(key, fence) in claims {
            let claimed = match fence {
                FenceOf::Holder(holder) => match claim_fence(&tx, holder, key).await {
                    Ok(()) => true,
                    Err(LockError::Lost { .. }) => false,
                    Err(e) => return Err(e.to_string()),
                },
                FenceOf::Token(token) => claim_with_fence(&tx, key, token)
                    .await
                    .map_err(|e| e.to_string())?,
            };
            if !claimed {
                // Dropping the transaction rolls it back.
                return Ok(false);
            }
        }
        let written = update.written();
        let keys: Vec<&str> = written.iter().map(|(k, _)| *k).collect();
        let reads = read_rows(&tx, &keys).await?;
        on_read(&reads.iter().map(|r| r.0).collect::<Vec<_>>());
        tokio::time::sleep(self.compute).await;
        let (mut names, mut fences, mut read, mut new, mut balance) =
            (vec![], vec![], vec![], vec![], vec![]);
        for (j, ((key, fence), &(value, wallet))) in written.iter().zip(&reads).enumerate() {
            names.push((*key).to_owned());
            fences.push(bigint(fence.fence())?);
            read.push(value);
            new.push(value + 1);
            balance.push(wallet + moved(update, j));
        }
        let params: [&(dyn leasehold::postgres::tokio_postgres::types::ToSql + Sync); 6] =
            [&names, &fences, &read, &new, &balance, &update.write];
        tx.execute(WRITE_CLAIMED, &params).await.map_err(failed)?;
        tx.commit().await.map_err(failed)?;
        Ok(true)
    }

    /// A plain read, then the write fenced alone: the README's one statement for one key; a
    /// transaction of such updates for a transfer (every key's fence not newer than the
    /// writer's, or nothing).
    async fn read_then_write(
        &mut self,
        update: &Update<'_>,
        on_read: impl FnOnce(&[i64]),
    ) -> Result<bool, String> {
        let written = update.written();
        let keys: Vec<&str> = written.iter().map(|(k, _)| *k).collect();
        let reads = read_rows(&self.client, &keys).await?;
        on_read(&reads.iter().map(|r| r.0).collect::<Vec<_>>());
        tokio::time::sleep(self.compute).await;
        if update.keys.len() == 1 {
            let (key, fence) = update.keys[0];
            let read = reads[0].0;
            let rows = self
                .client
                .execute(
                    WRITE_IF_NEWER,
                    &[
                        &key,
                        &(read + 1),
                        &bigint(fence.fence())?,
                        &update.write,
                        &read,
                    ],
                )
                .await
                .map_err(failed)?;
            return Ok(rows == 1);
        }
        let tx = self.client.transaction().await.map_err(failed)?;
        let mut order: Vec<(usize, &(&str, FenceOf<'_>))> =
            update.keys.iter().enumerate().collect();
        order.sort_by_key(|(_, (key, _))| *key);
        for (j, &(key, fence)) in order {
            let fence = bigint(fence.fence())?;
            let rows = match reads.get(j) {
                Some(&(value, wallet)) => tx
                    .execute(
                        "UPDATE resource_counters SET value = $2, balance = $3, fence = $4 \
                         WHERE key = $1 AND fence <= $4",
                        &[&key, &(value + 1), &(wallet + moved(update, j)), &fence],
                    )
                    .await
                    .map_err(failed)?,
                None => tx
                    .execute(
                        "UPDATE resource_counters SET fence = $2 WHERE key = $1 AND fence <= $2",
                        &[&key, &fence],
                    )
                    .await
                    .map_err(failed)?,
            };
            if rows != 1 {
                return Ok(false);
            }
        }
        for ((key, fence), &(value, _)) in written.iter().zip(&reads) {
            tx.execute(
                "INSERT INTO resource_writes (key, write, fence, read, new) \
                 VALUES ($1, $2, $3, $4, $5)",
                &[
                    key,
                    &update.write,
                    &bigint(fence.fence())?,
                    &value,
                    &(value + 1),
                ],
            )
            .await
            .map_err(failed)?;
        }
        tx.commit().await.map_err(failed)?;
        Ok(true)
    }

    pub(super) async fn balance(&mut self, key: &str) -> Result<i64, String> {
        Ok(read_rows(&self.client, &[key]).await?[0].1)
    }

    pub(super) async fn set_balance(&mut self, key: &str, balance: i64) -> Result<(), String> {
        self.client
            .execute(
                "INSERT INTO resource_counters (key, balance) VALUES ($1, $2) \
                 ON CONFLICT (key) DO UPDATE SET balance = EXCLUDED.balance",
                &[&key, &balance],
            )
            .await
            .map_err(failed)?;
        Ok(())
    }
}

/// What the `j`-th written key's balance changes by.
fn moved(update: &Update<'_>, j: usize) -> i64 {
    match (update.keys.len(), j) {
        (1, _) => 0,
        (_, 0) => -update.amount,
        _ => update.amount,
    }
}

/// Every counter and recorded write of the resource at `url`, the writes in the store's order.
pub(super) async fn read(url: &str) -> Result<ResourceRecords, String> {
    let client = connect(url).await?;
    let made: bool = client
        .query_one("SELECT to_regclass('resource_writes') IS NOT NULL", &[])
        .await
        .map_err(failed)?
        .get(0);
    let mut records = ResourceRecords::default();
    if !made {
        // No worker ever reached the resource: nothing was written.
        return Ok(records);
    }
    for row in client
        .query("SELECT key, value FROM resource_counters", &[])
        .await
        .map_err(failed)?
    {
        records.values.insert(row.get(0), row.get(1));
    }
    for row in client
        .query(
            "SELECT id, key, write, fence, read, new FROM resource_writes ORDER BY id",
            &[],
        )
        .await
        .map_err(failed)?
    {
        let write: String = row.get(2);
        let (hold, n) = parse_write_id(&write).ok_or_else(|| format!("a write named `{write}`"))?;
        let id: i64 = row.get(0);
        let fence: i64 = row.get(3);
        records.writes.push(StoredWrite {
            key: row.get(1),
            hold,
            n,
            fence: fence as u64,
            read: row.get(4),
            new: row.get(5),
            order: Some(id as u64),
        });
    }
    Ok(records)
}
