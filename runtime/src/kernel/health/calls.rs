//! A locker's calls to its engine, and the one place where their outcomes feed its health
//! ([`Calls::observe`]). The engine is taken from its [`Connection`] at each call (connected,
//! or why not yet), and each call's send time and outcome (answered, or
//! [`LockError::Unavailable`], a call refused because the engine is not connected yet among
//! them) go to the locker's [`Health`]. A call dropped before its answer reports nothing, and
//! so does one the store answered alone ([`heard`]): only the server's answer moves the state
//! towards connected. An engine that always answers (in memory) is not observed at all.
//!
//! Nothing here stands in for the store: the caller names the call it makes
//! ([`Calls::call`]). What has rules of its own is written here once: a renewal that could
//! not tell counts as unanswered, a give-back settles unobserved before its release is sent
//! and observed, and what needs no server (leaving a place, settling, a handover the engine
//! takes no part in) is not sent before the engine connected.

use std::future::Future;
use std::sync::{Arc, Weak};

use tokio::time::Instant;

use super::shared::Health;
use crate::error::LockError;
use crate::store::heard::heard;
use crate::store::keys::LockKeys;
use crate::store::kind::LeaseKind;
use crate::store::token::OwnerToken;
use crate::store::{
    refusal, Admin, Capabilities, Connection, Ending, Engine, Feature, Info, LeaderRecords, Leave,
    Renewal, Renewed, Session, Store, StoreFuture,
};

/// A locker's way to its engine, each call observed by its health.
pub(crate) struct Calls {
    engine: Connection,
    health: Arc<Health>,
    /// False where the engine always answers: its calls tell nothing.
    observed: bool,
}

impl Calls {
    /// The calls to `engine` (connected, or connecting), and the health they feed.
    pub(crate) fn new(engine: Connection) -> Arc<Calls> {
        let observed = !engine.info().always_answers;
        Arc::new_cyclic(|me: &Weak<Calls>| {
            let me = me.clone();
            let describe = Box::new(move || me.upgrade().map(|calls| calls.describe()));
            Calls {
                health: Arc::new(Health::new(&engine, describe)),
                engine,
                observed,
            }
        })
    }

    /// The health the calls feed.
    pub(crate) fn health(&self) -> &Arc<Health> {
        &self.health
    }

    /// What the engine is and offers: the connected engine's, or the deployment's before.
    pub(crate) fn info(&self) -> Info {
        self.engine.info()
    }

    /// Where the locks are, for `Debug` and messages ([`Info::description`]).
    pub(crate) fn describe(&self) -> String {
        self.info().description.into_owned()
    }

    /// What the engine offers ([`Info::capabilities`]).
    pub(crate) fn capabilities(&self) -> Capabilities {
        self.info().capabilities
    }

    /// Whether every call is answered at once ([`Info::always_answers`]).
    pub(crate) fn always_answers(&self) -> bool {
        !self.observed
    }

    /// Whether a batch of several ([`Store::acquire`]) can take the leases `batch` asks for
    /// (each key with its kind) in one round trip ([`Info::at_once`]).
    pub(crate) fn takes_all_at_once(&self, batch: &[(&LockKeys, LeaseKind)]) -> bool {
        self.info().at_once.covers(batch)
    }

    /// The error for a request that needs `feature`, which the engine lacks.
    pub(crate) fn refusal_of(&self, feature: Feature) -> LockError {
        let info = self.info();
        refusal(feature, &info.description, info.engine.why_not(feature))
    }

    /// The session of the connected engine, if it has sessions.
    pub(crate) fn session(&self) -> Option<Session> {
        self.engine.connected()?.session()
    }

    /// Which engine this is ([`Info::engine`]).
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn engine(&self) -> Engine {
        self.info().engine
    }

    /// The engine's operator part, unobserved (its calls are not the locks' traffic), or the
    /// refusal its capabilities call for, connected or not.
    pub(crate) fn admin_or_refusal(&self) -> Result<Admin<'_>, LockError> {
        match self.engine.store() {
            Ok(store) => store.admin_or_refusal(),
            Err(not_yet) if self.capabilities().inspection => Err(not_yet),
            Err(_) => Err(self.refusal_to_inspect()),
        }
    }

    fn refusal_to_inspect(&self) -> LockError {
        let info = self.info();
        LockError::config(match info.engine.why_not_inspect() {
            Some(why) => why.to_owned(),
            None => format!("inspecting locks is not supported on {}", info.description),
        })
    }

    /// The call `send` makes to the engine, observed: sent now, its outcome reported when it
    /// comes; an engine not connected yet fails it at once, and that is reported too.
    pub(crate) fn call<'a, T: Send + 'a>(
        &'a self,
        send: impl FnOnce(&'a dyn Store) -> StoreFuture<'a, T>,
    ) -> StoreFuture<'a, T> {
        self.observe(self.send(send), |_| None)
    }

    /// A call on the engine's leader records, observed like the lock calls (the records are
    /// the election's traffic); refused at once, unobserved, where the engine keeps none.
    pub(crate) fn leader<'a, T: Send + 'a, F>(
        &'a self,
        send: impl FnOnce(LeaderRecords<'a>) -> F,
    ) -> StoreFuture<'a, T>
    where
        F: Future<Output = Result<T, LockError>> + Send + 'a,
    {
        if !self.capabilities().leader_election {
            let refused = self.refusal_of(Feature::LeaderElection);
            return Box::pin(std::future::ready(Err(refused)));
        }
        self.call(|store| match store.leader_records_or_refusal() {
            Ok(records) => Box::pin(send(records)),
            Err(refused) => Box::pin(std::future::ready(Err(refused))),
        })
    }

    /// Renews `batch`, observed; a batch answered with nothing but "could not tell" (no
    /// RedLock majority, no ZooKeeper server answering its checks) is an unanswered call.
    pub(crate) fn renew<'a>(&'a self, batch: &'a [Renewal<'_>]) -> StoreFuture<'a, Vec<Renewed>> {
        let call = self.send(|store| store.renew(batch));
        self.observe(call, move |renewed: &Vec<Renewed>| {
            let unknown = !renewed.is_empty() && renewed.iter().all(|r| *r == Renewed::Unknown);
            unknown.then(|| format!("{} could not tell whether it renewed", self.describe()))
        })
    }

    /// Gives back what `token` holds or created ([`give_back` on `dyn Store`](Store)): the
    /// token's calls are settled first, unobserved (the engine's own calls while it settles
    /// say nothing of the locker's); then the release is sent, and observed from then on.
    /// Nothing was sent before the engine connected, so nothing to settle then.
    pub(crate) fn give_back<'a>(
        &'a self,
        keys: &'a LockKeys,
        token: &'a OwnerToken,
        kind: LeaseKind,
        valid_until: Instant,
    ) -> StoreFuture<'a, bool> {
        let settling = self
            .engine
            .connected()
            .and_then(|store| store.settle(token));
        Box::pin(async move {
            if let Some(settling) = settling {
                settling.await;
            }
            let ending = Ending::Release { kind, valid_until };
            let ended = self
                .call(|store| store.release(keys, token, ending))
                .await?;
            ended.released(|| self.describe())
        })
    }

    /// Hands the lock `token` holds on to another holder of this process
    /// ([`Ending::HandOver`]), observed: `None` when the engine need not take part (nothing
    /// was sent, and it answered alone: nothing observed); otherwise the engine's answer, the
    /// next holder's fence or `None`.
    pub(crate) async fn hand_over(
        &self,
        keys: &LockKeys,
        token: &OwnerToken,
    ) -> Option<Result<Option<u64>, LockError>> {
        match self
            .call(|store| store.release(keys, token, Ending::HandOver))
            .await
        {
            Ok(ended) => ended.handed_over(|| self.describe()),
            Err(e) => Some(Err(e)),
        }
    }

    /// Leaves `place` in the store's queue ([`Store::leave`]). Nothing waited before the
    /// engine connected, so nothing to leave then.
    pub(crate) fn leave(&self, keys: &LockKeys, place: Leave<'_>) {
        if let Some(store) = self.engine.connected() {
            store.leave(keys, place);
        }
    }

    /// The call `send` makes to the engine, or the engine's reason why it cannot be made
    /// yet; unobserved.
    fn send<'a, T: Send + 'a>(
        &'a self,
        send: impl FnOnce(&'a dyn Store) -> StoreFuture<'a, T>,
    ) -> StoreFuture<'a, T> {
        match self.engine.store() {
            Ok(store) => send(&**store),
            Err(e) => Box::pin(std::future::ready(Err(e))),
        }
    }

    /// The one place where a call's outcome reaches the health: `call`, sent now, reported
    /// answered or unanswered when its outcome comes (`unanswered`: why an answer counts as
    /// none).
    fn observe<'a, T: Send + 'a>(
        &'a self,
        call: StoreFuture<'a, T>,
        unanswered: impl FnOnce(&T) -> Option<String> + Send + 'a,
    ) -> StoreFuture<'a, T> {
        if !self.observed {
            return call;
        }
        let sent = Instant::now();
        Box::pin(async move {
            let (outcome, heard) = heard(call).await;
            match &outcome {
                Err(e) if e.is_unavailable() => self.health.unanswered(sent, e),
                Ok(answer) => match unanswered(answer) {
                    Some(why) => self.health.unanswered(sent, &why),
                    // The store's own answer (nothing held, a session that ended): no news.
                    None if !heard => {}
                    None => self.health.answered(sent),
                },
                _ if !heard => {}
                _ => self.health.answered(sent),
            }
            outcome
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryStore;
    use crate::store::{Deployment, LazyStore, Settings};

    /// A call reaches the engine once it is connected; before, it fails as unavailable,
    /// saying why, and nothing is sent.
    #[tokio::test]
    async fn a_call_reaches_the_engine_once_connected() {
        let keys = LockKeys::election("leasehold", "scheduler");
        let memory = Calls::new(Connection::Ready(Arc::new(MemoryStore::new())));
        let read = memory.leader(|records| records.read_leader(&keys, "leader"));
        assert_eq!(read.await.unwrap(), None);
        // Nothing listens on port 1: it never connects.
        let nodes = vec!["redis://127.0.0.1:1".to_owned(); 3];
        let settings = Settings {
            op_timeout: std::time::Duration::from_secs(1),
            connect_timeout: std::time::Duration::from_secs(1),
            locker_id: "test".to_owned(),
        };
        let redlock = Calls::new(Connection::Lazy(LazyStore::start(
            Deployment::RedLock(nodes),
            settings,
        )));
        let read = redlock.leader(|records| records.read_leader(&keys, "leader"));
        let refused = read.await.expect_err("not connected");
        assert!(refused.is_unavailable(), "{refused:?}");
        assert!(refused.to_string().contains("not connected"), "{refused}");
    }

    /// A memory store whose calls are observed, and whose settling of a token takes
    /// [`SETTLING`]: the engine's own calls while it settles.
    struct SettlesSlowly(MemoryStore);

    const SETTLING: std::time::Duration = std::time::Duration::from_secs(1);

    impl Store for SettlesSlowly {
        fn info(&self) -> Info {
            Info {
                always_answers: false,
                ..Store::info(&self.0)
            }
        }

        fn acquire<'a>(
            &'a self,
            batch: &'a [crate::store::AcquireRequest<'_>],
        ) -> StoreFuture<'a, Vec<crate::store::Attempt>> {
            Store::acquire(&self.0, batch)
        }

        fn release<'a>(
            &'a self,
            keys: &'a LockKeys,
            token: &'a OwnerToken,
            ending: Ending,
        ) -> StoreFuture<'a, crate::store::Ended> {
            Store::release(&self.0, keys, token, ending)
        }

        fn settle<'a>(&'a self, _: &'a OwnerToken) -> Option<crate::store::Settling<'a>> {
            Some(Box::pin(tokio::time::sleep(SETTLING)))
        }

        fn renew<'a>(&'a self, batch: &'a [Renewal<'_>]) -> StoreFuture<'a, Vec<Renewed>> {
            Store::renew(&self.0, batch)
        }

        fn subscribe<'a>(
            &'a self,
            keys: &'a LockKeys,
        ) -> StoreFuture<'a, crate::store::WakeSubscription> {
            Store::subscribe(&self.0, keys)
        }
    }

    /// A give-back's settling is the engine's own business: the health observes the release
    /// sent after it, from its send time. So a call that failed while the settling ran is
    /// older than the release's answer, which ends the suspension it caused; counted from
    /// the settling's start, the answer would be older than the failure, and the locker
    /// would stay suspended although the engine answered.
    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_give_back_is_observed_from_its_release_not_its_settling() {
        let calls = Calls::new(Connection::Ready(Arc::new(SettlesSlowly(
            MemoryStore::new(),
        ))));
        let keys = LockKeys::new("leasehold", "k");
        let token = OwnerToken::generate();
        let give_back = calls.give_back(&keys, &token, LeaseKind::Exclusive, Instant::now());
        tokio::pin!(give_back);
        // Settling, half-way: another call fails.
        let failed = async {
            tokio::time::sleep(SETTLING / 2).await;
            calls.health().unanswered(Instant::now(), &"no answer");
            assert!(!calls.health().state().is_connected());
        };
        let (given, ()) = tokio::join!(&mut give_back, failed);
        assert!(!given.unwrap(), "the token held nothing");
        assert!(
            calls.health().state().is_connected(),
            "{:?}: the release's answer came after the failure",
            calls.health().state()
        );
    }
}
