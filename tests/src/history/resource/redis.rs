//! The resource on Redis: a hash per key ([`resource_key`]) with the library's `fence`, the
//! counter `value`, the wallet's `balance` and a field `w:<hold>:<n>` per accepted write.

use std::collections::BTreeMap;
use std::time::Duration;

use leasehold::fenced::{self, Claimed, FencedWrite, Record};
use leasehold::LockError;
use redis::aio::MultiplexedConnection;

use super::client::{entry, FenceOf, Update};
use super::records::{ResourceRecords, StoredWrite};
use super::{parse_write_id, resource_key, Fencing};

/// A transfer fenced on its write only, as `write_if_newer.lua` writes one record (after the
/// library's `FENCE_CMP_LUA`): accepted unless a record has seen a newer fence, and every
/// record then carries the writer's. The old way, which the library has no helper for (a
/// transfer under claims is the library's `fenced::write_all_if_claimed`).
const TRANSFER_IF_NEWER: &str = r"
-- KEYS           the records of every key of the hold (the two written first)
-- ARGV[1]        the write's name (w:<hold>:<n>)
-- ARGV[2..n+1]   the writer's fence of each record, in KEYS' order
-- ARGV[n+2..]    for each of the first two records: value, balance, the write's record
-- Returns 1 when written, 0 when a record had seen a newer fence.
local n = #KEYS
for i = 1, n do
  local stored = redis.call('HGET', KEYS[i], 'fence')
  if stored and leasehold_fence_cmp(ARGV[1 + i], stored) < 0 then
    return 0
  end
end
for i = 1, n do
  redis.call('HSET', KEYS[i], 'fence', ARGV[1 + i])
end
for j = 0, 1 do
  local at = n + 2 + 3 * j
  redis.call('HSET', KEYS[1 + j], 'value', ARGV[at], 'balance', ARGV[at + 1], ARGV[1], ARGV[at + 2])
end
return 1
";

/// One worker task's connection to the resource on Redis.
pub struct RedisResource {
    conn: MultiplexedConnection,
    fencing: Fencing,
    compute: Duration,
    transfer_if_newer: redis::Script,
}

/// A record as read for a write: its counter and its wallet's balance.
#[derive(Clone, Copy)]
struct Read {
    value: i64,
    balance: i64,
}

impl Read {
    fn of(record: &Record) -> Result<Read, String> {
        let field = |name: &str| -> Result<i64, String> {
            let value: Option<i64> = record.get(name).map_err(|e| e.to_string())?;
            Ok(value.unwrap_or(0))
        };
        Ok(Read {
            value: field("value")?,
            balance: field("balance")?,
        })
    }
}

impl RedisResource {
    pub(super) async fn connect(
        url: &str,
        fencing: Fencing,
        compute: Duration,
    ) -> Result<Self, String> {
        let conn = redis::Client::open(url)
            .map_err(|e| e.to_string())?
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| e.to_string())?;
        let newer = format!("{}\n{TRANSFER_IF_NEWER}", fenced::FENCE_CMP_LUA);
        Ok(RedisResource {
            conn,
            fencing,
            compute,
            transfer_if_newer: redis::Script::new(&newer),
        })
    }

    pub(super) async fn update(
        &mut self,
        update: &Update<'_>,
        on_read: impl FnOnce(&[i64]),
    ) -> Result<bool, String> {
        // The first touch: claims of every key's record, or plain reads.
        let mut reads = Vec::new();
        match self.fencing {
            Fencing::Claim if update.keys.len() == 1 => {
                return self.claim_and_write(update, on_read).await;
            }
            Fencing::Claim => {
                for &(key, fence) in &update.keys {
                    match self.claim(key, fence).await? {
                        Some(record) => reads.push(Read::of(&record)?),
                        None => return Ok(false),
                    }
                }
            }
            Fencing::WriteOnly => {
                for &(key, _) in update.written() {
                    let (value, balance): (Option<i64>, Option<i64>) = redis::cmd("HMGET")
                        .arg(resource_key(key))
                        .arg("value")
                        .arg("balance")
                        .query_async(&mut self.conn)
                        .await
                        .map_err(|e| e.to_string())?;
                    reads.push(Read {
                        value: value.unwrap_or(0),
                        balance: balance.unwrap_or(0),
                    });
                }
            }
        }
        let values: Vec<i64> = reads.iter().take(2).map(|r| r.value).collect();
        on_read(&values);
        tokio::time::sleep(self.compute).await;
        if update.keys.len() == 1 {
            // Write-only, one key: the library's blind write, the record with it.
            let (key, fence) = update.keys[0];
            let fence = fence.fence();
            let read = reads[0].value;
            let fields = [
                ("value", (read + 1).to_string()),
                (update.write.as_str(), entry(fence, read, read + 1)),
            ];
            let written =
                fenced::write_if_newer(&mut self.conn, &resource_key(key), &fields, fence)
                    .await
                    .map_err(|e| e.to_string())?;
            return Ok(written.is_accepted());
        }
        self.transfer(update, &reads).await
    }

    /// Claims `key`'s record for `fence`: the record after the claim, `None` when refused
    /// (a newer holder claimed it, or the guard's lease is known lost and nothing was sent).
    async fn claim(&mut self, key: &str, fence: FenceOf<'_>) -> Result<Option<Record>, String> {
        let record = resource_key(key);
        match fence {
            FenceOf::Holder(holder) => match fenced::claim(&mut self.conn, holder, &record).await {
                Ok(claim) => Ok(Some(claim.record().clone())),
                Err(LockError::Lost { .. }) => Ok(None),
                Err(e) => Err(e.to_string()),
            },
            FenceOf::Token(token) => {
                match fenced::claim_with_fence(&mut self.conn, &record, token).await {
                    Ok(Claimed::Yes(record)) => Ok(Some(record)),
                    Ok(Claimed::Refused { .. }) => Ok(None),
                    Err(e) => Err(e.to_string()),
                }
            }
        }
    }

    /// One key under a claim: `fenced::claim` and `Claim::write` for a holder, the guard-free
    /// `claim_with_fence` and `write_if_claimed` for a token.
    async fn claim_and_write(
        &mut self,
        update: &Update<'_>,
        on_read: impl FnOnce(&[i64]),
    ) -> Result<bool, String> {
        let (key, fence) = update.keys[0];
        let record = resource_key(key);
        let token = fence.fence();
        let fields = |read: i64| {
            [
                ("value", (read + 1).to_string()),
                (update.write.as_str(), entry(token, read, read + 1)),
            ]
        };
        match fence {
            FenceOf::Holder(holder) => {
                let claim = match fenced::claim(&mut self.conn, holder, &record).await {
                    Ok(claim) => claim,
                    Err(LockError::Lost { .. }) => return Ok(false),
                    Err(e) => return Err(e.to_string()),
                };
                let read = Read::of(claim.record())?.value;
                on_read(&[read]);
                tokio::time::sleep(self.compute).await;
                match claim.write(&mut self.conn, &fields(read)).await {
                    Ok(()) => Ok(true),
                    // Lost: a newer holder claimed the record, or the lease is known lost
                    // (nothing sent). Config: the record lost its claim. Nothing was written.
                    Err(LockError::Lost { .. } | LockError::Config { .. }) => Ok(false),
                    Err(e) => Err(e.to_string()),
                }
            }
            FenceOf::Token(_) => {
                let Some(claimed) = self.claim(key, fence).await? else {
                    return Ok(false);
                };
                let read = Read::of(&claimed)?.value;
                on_read(&[read]);
                tokio::time::sleep(self.compute).await;
                let written =
                    fenced::write_if_claimed(&mut self.conn, &record, &fields(read), token)
                        .await
                        .map_err(|e| e.to_string())?;
                Ok(written == FencedWrite::Accepted)
            }
        }
    }

    /// The atomic write of a transfer: `amount` from the first wallet to the second, each
    /// counter plus one, under every record's claim (the library's `write_all_if_claimed`:
    /// every record of the hold must still carry its claim, the two written and the others)
    /// or fenced on the write alone.
    async fn transfer(&mut self, update: &Update<'_>, reads: &[Read]) -> Result<bool, String> {
        let mut changes: Vec<Vec<(String, String)>> = vec![Vec::new(); update.keys.len()];
        for (j, (read, (_, fence))) in reads.iter().zip(update.written()).enumerate() {
            let moved = if j == 0 {
                -update.amount
            } else {
                update.amount
            };
            changes[j] = vec![
                ("value".to_owned(), (read.value + 1).to_string()),
                ("balance".to_owned(), (read.balance + moved).to_string()),
                (
                    update.write.clone(),
                    entry(fence.fence(), read.value, read.value + 1),
                ),
            ];
        }
        if self.fencing == Fencing::Claim {
            let records: Vec<String> = update.keys.iter().map(|(k, _)| resource_key(k)).collect();
            let plan: Vec<fenced::RecordWrite<'_, String, String>> = records
                .iter()
                .zip(&update.keys)
                .zip(&changes)
                .map(|((record, (_, fence)), fields)| {
                    (record.as_str(), fence.fence(), fields.as_slice())
                })
                .collect();
            let written = fenced::write_all_if_claimed(&mut self.conn, &plan)
                .await
                .map_err(|e| e.to_string())?;
            return Ok(written.is_accepted());
        }
        let mut call = self.transfer_if_newer.prepare_invoke();
        for &(key, _) in &update.keys {
            call.key(resource_key(key));
        }
        call.arg(&update.write);
        for (_, fence) in &update.keys {
            call.arg(fence.fence());
        }
        for fields in changes.iter().take(2) {
            for (_, value) in fields {
                call.arg(value);
            }
        }
        let written: i64 = call
            .invoke_async(&mut self.conn)
            .await
            .map_err(|e| e.to_string())?;
        Ok(written == 1)
    }

    pub(super) async fn balance(&mut self, key: &str) -> Result<i64, String> {
        let balance: Option<i64> = redis::cmd("HGET")
            .arg(resource_key(key))
            .arg("balance")
            .query_async(&mut self.conn)
            .await
            .map_err(|e| e.to_string())?;
        Ok(balance.unwrap_or(0))
    }

    pub(super) async fn set_balance(&mut self, key: &str, balance: i64) -> Result<(), String> {
        redis::cmd("HSET")
            .arg(resource_key(key))
            .arg("balance")
            .arg(balance)
            .query_async(&mut self.conn)
            .await
            .map_err(|e| e.to_string())
    }
}

/// Every record of the resource at `url`: each key's counter and every write recorded in it.
pub(super) async fn read(url: &str) -> Result<ResourceRecords, String> {
    let mut conn = redis::Client::open(url)
        .map_err(|e| e.to_string())?
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| e.to_string())?;
    let mut hashes = Vec::new();
    let mut cursor = 0u64;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(resource_key("*"))
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut conn)
            .await
            .map_err(|e| e.to_string())?;
        hashes.extend(keys);
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    let mut records = ResourceRecords::default();
    let prefix = resource_key("");
    for hash in hashes {
        let fields: BTreeMap<String, String> = redis::cmd("HGETALL")
            .arg(&hash)
            .query_async(&mut conn)
            .await
            .map_err(|e| e.to_string())?;
        let key = hash.strip_prefix(&prefix).unwrap_or(&hash).to_owned();
        let value = fields.get("value").map_or(Ok(0), |v| {
            v.parse::<i64>()
                .map_err(|_| format!("{hash}: value `{v}` is not a number"))
        })?;
        records.values.insert(key.clone(), value);
        for (field, text) in &fields {
            let Some((hold, n)) = parse_write_id(field) else {
                continue;
            };
            let numbers: Vec<i64> = text.split(' ').filter_map(|n| n.parse().ok()).collect();
            let [fence, read, new] = numbers[..] else {
                return Err(format!("{hash}: the record {field} is `{text}`"));
            };
            records.writes.push(StoredWrite {
                key: key.clone(),
                hold,
                n,
                fence: fence as u64,
                read,
                new,
                order: None,
            });
        }
    }
    Ok(records)
}
