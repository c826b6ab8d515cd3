//! The Redis election users write by hand: a lock key (`SET NX PX`) with a term counter and a
//! record key of the leader's identity, written in one script; candidates wait on a pub/sub
//! channel the winner and a resigner publish to (RESP3, on the candidate's one connection),
//! with a 100 ms re-check should a message be lost. No renewal: the benchmark's leaders hold
//! for well under the 10 s lease.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, IntoConnectionInfo, ProtocolVersion, PushInfo, Script};
use tokio::sync::{mpsc, Mutex};

use crate::baselines::token;
use crate::scenarios::leader::handover::Election;

/// Its name in the report.
pub(crate) const REDIS_ELECTION: &str =
    "hand-written SET NX PX + term + record, pub/sub wake-ups (redis-rs)";

const LEASE: Duration = Duration::from_secs(10);

/// A waiter's and an observer's re-check when no message came.
const RECHECK: Duration = Duration::from_millis(100);

/// KEYS: lock, term counter, record. ARGV: owner token, lease ms, identity, channel.
/// Returns the new term, or nil when the lock is held.
const CAMPAIGN: &str = "
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local term = redis.call('INCR', KEYS[2])
  redis.call('SET', KEYS[3], term .. ':' .. ARGV[3], 'PX', ARGV[2])
  redis.call('PUBLISH', ARGV[4], 'elected')
  return term
end
return false
";

/// KEYS: lock, record. ARGV: owner token, channel. Deletes both if the token holds the lock.
const RESIGN: &str = "
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1], KEYS[2])
  redis.call('PUBLISH', ARGV[2], 'resigned')
  return 1
end
return 0
";

/// The election `name` on the server at `url`.
pub(crate) struct RedisElection {
    url: String,
    lock: String,
    term: String,
    record: String,
    channel: String,
    campaign: Arc<Script>,
    resign: Arc<Script>,
}

/// A candidate's (or the observer's) connection, subscribed to the election's channel.
pub(crate) struct Subscribed {
    conn: MultiplexedConnection,
    messages: Mutex<mpsc::UnboundedReceiver<PushInfo>>,
}

impl Subscribed {
    /// Forgets the messages so far: the caller is about to look for itself.
    async fn forget(&self) {
        let mut messages = self.messages.lock().await;
        while messages.try_recv().is_ok() {}
    }

    /// Until a message, or [`RECHECK`].
    async fn wait(&self) {
        let mut messages = self.messages.lock().await;
        let _ = tokio::time::timeout(RECHECK, messages.recv()).await;
    }
}

impl RedisElection {
    pub(crate) fn new(url: &str, name: String) -> RedisElection {
        let key = |part: &str| format!("raw-leader:{{{name}}}:{part}");
        RedisElection {
            url: url.to_owned(),
            lock: key("lock"),
            term: key("term"),
            record: key("record"),
            channel: key("wake"),
            campaign: Arc::new(Script::new(CAMPAIGN)),
            resign: Arc::new(Script::new(RESIGN)),
        }
    }

    async fn subscribed(&self) -> Subscribed {
        let info = self.url.as_str().into_connection_info().expect("url");
        let settings = info
            .redis_settings()
            .clone()
            .set_protocol(ProtocolVersion::RESP3);
        let client = redis::Client::open(info.set_redis_settings(settings)).expect("client");
        let (tx, messages) = mpsc::unbounded_channel();
        let config = AsyncConnectionConfig::new().set_push_sender(tx);
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .expect("connect");
        conn.subscribe(&self.channel).await.expect("subscribe");
        Subscribed {
            conn,
            messages: Mutex::new(messages),
        }
    }

    async fn step_down(&self, mut conn: MultiplexedConnection, token: &str) {
        let _: i64 = self
            .resign
            .key(&self.lock)
            .key(&self.record)
            .arg(token)
            .arg(&self.channel)
            .invoke_async(&mut conn)
            .await
            .expect("resign");
    }
}

impl Election for RedisElection {
    type Candidate = Subscribed;
    /// The owner token.
    type Leadership = String;
    type Observer = Subscribed;

    async fn candidate(&self) -> Subscribed {
        self.subscribed().await
    }

    async fn campaign<'a>(&'a self, candidate: &'a Subscribed, identity: &'a str) -> (String, u64) {
        let owner = token();
        loop {
            candidate.forget().await;
            let term: Option<u64> = self
                .campaign
                .key(&self.lock)
                .key(&self.term)
                .key(&self.record)
                .arg(&owner)
                .arg(LEASE.as_millis() as u64)
                .arg(identity)
                .arg(&self.channel)
                .invoke_async(&mut candidate.conn.clone())
                .await
                .expect("campaign");
            if let Some(term) = term {
                return (owner, term);
            }
            candidate.wait().await;
        }
    }

    async fn resign<'a>(&'a self, candidate: &'a Subscribed, owner: String) {
        self.step_down(candidate.conn.clone(), &owner).await;
    }

    /// Redis has no session to end: the hand-written guard's `Drop` sends the same resign
    /// from a spawned task, as a user's RAII guard would.
    async fn end_session(&self, candidate: Subscribed, owner: String) {
        let conn = candidate.conn.clone();
        drop(candidate);
        let (script, lock, record, channel) = (
            self.resign.clone(),
            self.lock.clone(),
            self.record.clone(),
            self.channel.clone(),
        );
        tokio::spawn(async move {
            let mut conn = conn;
            let _: Result<i64, _> = script
                .key(lock)
                .key(record)
                .arg(owner)
                .arg(channel)
                .invoke_async(&mut conn)
                .await;
        });
    }

    async fn observer(&self) -> Subscribed {
        self.subscribed().await
    }

    async fn next_leader<'a>(&'a self, observer: &'a mut Subscribed, last: u64) -> u64 {
        loop {
            observer.forget().await;
            let record: Option<String> = redis::cmd("GET")
                .arg(&self.record)
                .query_async(&mut observer.conn.clone())
                .await
                .expect("read the record");
            let term = record
                .and_then(|r| r.split_once(':').and_then(|(t, _)| t.parse().ok()))
                .unwrap_or(0);
            if term != 0 && term != last {
                return term;
            }
            observer.wait().await;
        }
    }
}
