//! Tests of the ZooKeeper harness, against real servers started from Debian's package, driven
//! through `zookeeper-client` with exactly the operations a lock recipe needs: a container parent,
//! ephemeral sequential children, their `czxid`, listing them, a one-shot watch on the
//! predecessor, deletion by version, and what a session reports when its server freezes, dies or
//! comes back.
//!
//! Run `scripts/ensure-zookeeper` first (it installs `zookeeper` and a JRE when missing).

use std::future::Future;
use std::time::{Duration, Instant};

use leasehold_tests::harness::{ZkEnsemble, ZkServer};
use tokio::time::timeout;
use zookeeper_client::{
    Acls, Client, CreateMode, CreateOptions, Error, EventType, SessionState, StateWatcher,
};

/// Every test body runs under this bound, so a harness bug fails the test instead of hanging CI.
async fn bounded<F: Future<Output = ()>>(test: F) {
    timeout(Duration::from_secs(120), test)
        .await
        .expect("the test did not finish within 120s");
}

const PERSISTENT: CreateOptions<'static> = CreateMode::Persistent.with_acls(Acls::anyone_all());
const CONTAINER: CreateOptions<'static> = CreateMode::Container.with_acls(Acls::anyone_all());
const EPHEMERAL_SEQUENTIAL: CreateOptions<'static> =
    CreateMode::EphemeralSequential.with_acls(Acls::anyone_all());

/// A client of `connect_string` asking for `session_timeout`.
async fn connect(connect_string: &str, session_timeout: Duration) -> Client {
    timeout(
        Duration::from_secs(20),
        Client::connector()
            .with_session_timeout(session_timeout)
            .connect(connect_string),
    )
    .await
    .unwrap_or_else(|_| panic!("no session with {connect_string} within 20s"))
    .unwrap_or_else(|e| panic!("cannot connect to {connect_string}: {e}"))
}

/// Waits for the session states `watcher` reports until `wanted`, and returns all of them.
async fn states_until(
    watcher: &mut StateWatcher,
    wanted: SessionState,
    within: Duration,
) -> Vec<SessionState> {
    let mut seen = Vec::new();
    let waited = timeout(within, async {
        loop {
            let state = watcher.changed().await;
            seen.push(state);
            if state == wanted {
                return;
            }
        }
    })
    .await;
    assert!(
        waited.is_ok(),
        "the session did not become {wanted} within {within:?} (saw {seen:?})"
    );
    seen
}

/// Retries `op` while the client reports a lost connection (a failover in progress): a request
/// sent before the loss fails with the error that ended the connection (`Error::Custom`, e.g. "no
/// response from connection in 4000ms", or `ConnectionLoss` on EOF), so its outcome is unknown; a
/// request made while disconnected waits for the reconnection instead. Only for idempotent `op`s.
async fn retrying<T, F, Fut>(what: &str, mut op: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Error>>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match op().await {
            Ok(value) => return value,
            Err(Error::ConnectionLoss | Error::Custom(_)) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("{what}: {e}"),
        }
    }
}

/// Polls until `path` is gone, as seen by `client`.
async fn until_gone(client: &Client, path: &str, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        match client.check_stat(path).await {
            Ok(None) => return,
            Ok(Some(_)) | Err(Error::ConnectionLoss) => {}
            Err(e) => panic!("checking {path}: {e}"),
        }
        assert!(
            Instant::now() < deadline,
            "{path} was still there after {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn process_exists(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the pid exists.
    unsafe { libc::kill(pid as libc::pid_t, 0) == 0 }
}

#[tokio::test]
async fn a_standalone_server_serves_and_keeps_its_data_across_restarts() {
    bounded(async {
        let began = Instant::now();
        let zk = ZkServer::start().await;
        eprintln!("ZkServer::start took {:?}", began.elapsed());
        assert_eq!(zk.connect_string(), format!("127.0.0.1:{}", zk.port()));
        assert!(zk.addr().ip().is_loopback());
        assert_eq!(zk.myid(), None);
        assert_eq!(zk.mode().await.as_deref(), Some("standalone"));
        assert_eq!(zk.four_letter_word("ruok").await.unwrap(), "imok");
        assert!(zk.log_path().starts_with(zk.dir()));
        assert!(
            std::fs::read_to_string(zk.log_path())
                .unwrap()
                .contains("ZooKeeper"),
            "the server logs to its log file"
        );

        // Session timeouts are clamped to what the server's config allows. The client gives its
        // first connection only the timeout it asks for, which a busy machine may overrun.
        let mut short = None;
        for _ in 0..20 {
            let attempt = Client::connector()
                .with_session_timeout(Duration::from_millis(100))
                .connect(&zk.connect_string())
                .await;
            match attempt {
                Ok(client) => {
                    short = Some(client);
                    break;
                }
                Err(Error::Timeout) => {}
                Err(e) => panic!("cannot connect with a 100ms session timeout: {e}"),
            }
        }
        let short = short.expect("no session asking for 100ms in 20 attempts");
        assert_eq!(short.session_timeout(), ZkServer::MIN_SESSION_TIMEOUT);
        let long = connect(&zk.connect_string(), Duration::from_secs(600)).await;
        assert_eq!(long.session_timeout(), ZkServer::MAX_SESSION_TIMEOUT);
        let client = connect(&zk.connect_string(), Duration::from_secs(2)).await;
        assert_eq!(client.session_timeout(), Duration::from_secs(2));
        let (created, _) = client
            .create("/kept", b"across restarts", &PERSISTENT)
            .await
            .unwrap();
        drop((short, long, client));

        let pid = zk.pid().expect("a started server runs");
        zk.kill9();
        assert_eq!(zk.pid(), None);
        assert!(!process_exists(pid), "pid {pid} is still there after kill9");
        assert_eq!(zk.mode().await, None);
        zk.kill9(); // idempotent

        let port = zk.port();
        let began = Instant::now();
        zk.restart().await;
        eprintln!("ZkServer::restart took {:?}", began.elapsed());
        assert_eq!(zk.port(), port);
        assert!(zk.pid().is_some_and(|new| new != pid));
        let client = connect(&zk.connect_string(), Duration::from_secs(2)).await;
        let (data, stat) = client.get_data("/kept").await.unwrap();
        assert_eq!(data, b"across restarts");
        assert_eq!(stat.czxid, created.czxid, "the same znode, not a new one");
        drop(client);

        // A graceful stop, and a stop of a paused server, can be restarted from too.
        zk.stop();
        assert_eq!(zk.pid(), None);
        zk.restart().await;
        zk.pause();
        zk.stop();
        zk.restart().await;
        let client = connect(&zk.connect_string(), Duration::from_secs(2)).await;
        assert!(client.check_stat("/kept").await.unwrap().is_some());
    })
    .await;
}

#[tokio::test]
async fn lock_recipe_operations_work_against_the_server() {
    bounded(async {
        let zk = ZkServer::start().await;
        let alice = connect(&zk.connect_string(), Duration::from_secs(4)).await;
        let bob = connect(&zk.connect_string(), Duration::from_secs(4)).await;
        assert_ne!(alice.session_id(), bob.session_id());

        // A contender under a missing parent learns it must make the parent first.
        assert_eq!(
            alice
                .create("/locks/orders/lock-", b"", &EPHEMERAL_SEQUENTIAL)
                .await
                .unwrap_err(),
            Error::NoNode
        );
        alice.create("/locks", b"", &PERSISTENT).await.unwrap();
        let (parent, _) = alice
            .create("/locks/orders", b"", &CONTAINER)
            .await
            .unwrap();
        assert_eq!(
            alice
                .create("/locks/orders", b"", &CONTAINER)
                .await
                .unwrap_err(),
            Error::NodeExists
        );

        // Each contender's node: its sequence number, printed as ten digits, ends the path.
        let (first, first_seq) = alice
            .create("/locks/orders/lock-", b"alice", &EPHEMERAL_SEQUENTIAL)
            .await
            .unwrap();
        let (second, second_seq) = bob
            .create("/locks/orders/lock-", b"bob", &EPHEMERAL_SEQUENTIAL)
            .await
            .unwrap();
        let first_path = format!("/locks/orders/lock-{first_seq}");
        let second_path = format!("/locks/orders/lock-{second_seq}");
        assert_eq!(first_path, "/locks/orders/lock-0000000000");
        assert_eq!(second_seq.into_i64(), first_seq.into_i64() + 1);
        assert!(first.czxid > parent.czxid && second.czxid > first.czxid);
        assert_eq!(first.ephemeral_owner, alice.session_id().0);
        assert_eq!(second.ephemeral_owner, bob.session_id().0);
        let (data, read_back) = bob.get_data(&first_path).await.unwrap();
        assert_eq!(data, b"alice");
        assert_eq!(
            read_back, first,
            "get_data returns the Stat that create did"
        );

        let mut children = bob.list_children("/locks/orders").await.unwrap();
        children.sort();
        assert_eq!(children, ["lock-0000000000", "lock-0000000001"]);
        let (_, parent_now) = bob.get_children("/locks/orders").await.unwrap();
        assert_eq!(parent_now.num_children, 2);
        assert_eq!(parent_now.czxid, parent.czxid);

        // Bob waits on his predecessor with a one-shot watch; Alice releases by version.
        let (stat, watcher) = bob.check_and_watch_stat(&first_path).await.unwrap();
        assert_eq!(stat, Some(first));
        let fired = tokio::spawn(async move { watcher.changed().await });
        assert_eq!(
            alice
                .delete(&first_path, Some(first.version + 1))
                .await
                .unwrap_err(),
            Error::BadVersion
        );
        assert!(!fired.is_finished(), "a failed delete fired the watch");
        alice
            .delete(&first_path, Some(first.version))
            .await
            .unwrap();
        let event = timeout(Duration::from_secs(5), fired)
            .await
            .expect("the predecessor's deletion did not fire the watch within 5s")
            .unwrap();
        assert_eq!(event.event_type, EventType::NodeDeleted);
        assert_eq!(event.path, first_path);
        assert_eq!(bob.check_stat(&first_path).await.unwrap(), None);
        assert_eq!(
            alice.delete(&first_path, None).await.unwrap_err(),
            Error::NoNode
        );

        // A watch on a node that does not exist fires on its creation.
        let (missing, watcher) = bob.check_and_watch_stat("/locks/later").await.unwrap();
        assert_eq!(missing, None);
        alice
            .create("/locks/later", b"", &PERSISTENT)
            .await
            .unwrap();
        let event = timeout(Duration::from_secs(5), watcher.changed())
            .await
            .expect("creation did not fire the watch within 5s");
        assert_eq!(event.event_type, EventType::NodeCreated);

        // Closing Bob's session removes his ephemeral node; the emptied container goes too.
        drop(bob);
        until_gone(&alice, &second_path, Duration::from_secs(5)).await;
        until_gone(&alice, "/locks/orders", Duration::from_secs(10)).await;
        assert!(alice.check_stat("/locks").await.unwrap().is_some());
    })
    .await;
}

#[tokio::test]
async fn a_short_server_pause_keeps_the_session() {
    bounded(async {
        let zk = ZkServer::start().await;
        let client = connect(&zk.connect_string(), Duration::from_secs(4)).await;
        let session = client.session_id();
        let (node, seq) = client
            .create("/held-", b"", &EPHEMERAL_SEQUENTIAL)
            .await
            .unwrap();
        let mut states = client.state_watcher();
        assert_eq!(client.state(), SessionState::SyncConnected);

        let pid = zk.pid();
        zk.pause();
        assert_eq!(zk.pid(), pid, "a paused server still runs");
        assert_eq!(zk.mode().await, None, "a paused server answered `srvr`");
        // The client gives up on a silent connection after 2/5 of the session timeout.
        let began = Instant::now();
        let seen = states_until(
            &mut states,
            SessionState::Disconnected,
            Duration::from_secs(10),
        )
        .await;
        assert_eq!(seen, [SessionState::Disconnected]);
        eprintln!("paused: Disconnected after {:?}", began.elapsed());
        // A request made while disconnected does not fail: it waits for the reconnection.
        let path = format!("/held-{seq}");
        let queued = tokio::spawn({
            let client = client.clone();
            let path = path.clone();
            async move { client.check_stat(&path).await }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!queued.is_finished(), "a request was answered while paused");
        zk.resume();
        let seen = states_until(
            &mut states,
            SessionState::SyncConnected,
            Duration::from_secs(10),
        )
        .await;
        assert_eq!(seen, [SessionState::SyncConnected]);
        assert_eq!(client.session_id(), session);
        let stat = timeout(Duration::from_secs(5), queued)
            .await
            .expect("the queued request was not answered after the reconnection")
            .unwrap()
            .unwrap()
            .expect("still held");
        assert_eq!((stat.czxid, stat.ephemeral_owner), (node.czxid, session.0));
    })
    .await;
}

#[tokio::test]
async fn a_server_paused_past_the_session_timeout_expires_the_session() {
    bounded(async {
        let zk = ZkServer::start().await;
        let client = connect(&zk.connect_string(), Duration::from_secs(2)).await;
        let (_, seq) = client
            .create("/held-", b"", &EPHEMERAL_SEQUENTIAL)
            .await
            .unwrap();
        let path = format!("/held-{seq}");
        let (_, watcher) = client.check_and_watch_stat(&path).await.unwrap();
        let mut states = client.state_watcher();

        zk.pause();
        // The client cannot reach the server, so it concludes expiry itself, after 7/5 of
        // the session timeout without an answer.
        let began = Instant::now();
        let seen = states_until(&mut states, SessionState::Expired, Duration::from_secs(15)).await;
        eprintln!("paused: {seen:?} after {:?}", began.elapsed());
        assert_eq!(seen, [SessionState::Disconnected, SessionState::Expired]);
        // A waiter watching its predecessor is woken by the expiry.
        let event = timeout(Duration::from_secs(5), watcher.changed())
            .await
            .expect("the expiry did not fire the node watch");
        assert_eq!(event.event_type, EventType::Session);
        assert_eq!(event.session_state, SessionState::Expired);
        assert_eq!(
            client.check_stat("/").await.unwrap_err(),
            Error::SessionExpired
        );

        zk.resume();
        assert_eq!(zk.wait_until_serving().await, "standalone");
        // The server expires the session as soon as it runs again, and drops its node.
        let observer = connect(&zk.connect_string(), Duration::from_secs(2)).await;
        until_gone(&observer, &path, Duration::from_secs(10)).await;
        assert_eq!(client.state(), SessionState::Expired, "expiry is terminal");
    })
    .await;
}

#[tokio::test]
async fn a_server_killed_and_restarted_in_time_restores_the_session() {
    bounded(async {
        let zk = ZkServer::start().await;
        let client = connect(&zk.connect_string(), Duration::from_secs(8)).await;
        let session = client.session_id();
        let (node, seq) = client
            .create("/held-", b"", &EPHEMERAL_SEQUENTIAL)
            .await
            .unwrap();
        let mut states = client.state_watcher();

        zk.kill9();
        // A killed server's connection is reset: the client sees it at once.
        let seen = states_until(
            &mut states,
            SessionState::Disconnected,
            Duration::from_secs(5),
        )
        .await;
        assert_eq!(seen, [SessionState::Disconnected]);
        zk.restart().await;
        let seen = states_until(
            &mut states,
            SessionState::SyncConnected,
            Duration::from_secs(10),
        )
        .await;
        assert_eq!(seen, [SessionState::SyncConnected]);
        assert_eq!(
            client.session_id(),
            session,
            "the restarted server loaded the session"
        );
        let stat = client
            .check_stat(&format!("/held-{seq}"))
            .await
            .unwrap()
            .expect("the ephemeral node survives a restart within the session timeout");
        assert_eq!((stat.czxid, stat.ephemeral_owner), (node.czxid, session.0));
    })
    .await;
}

#[tokio::test]
async fn a_server_down_past_the_session_timeout_expires_the_session() {
    bounded(async {
        let zk = ZkServer::start().await;
        let client = connect(&zk.connect_string(), Duration::from_secs(2)).await;
        let (_, seq) = client
            .create("/held-", b"", &EPHEMERAL_SEQUENTIAL)
            .await
            .unwrap();
        let mut states = client.state_watcher();

        zk.kill9();
        let seen = states_until(&mut states, SessionState::Expired, Duration::from_secs(15)).await;
        assert_eq!(seen, [SessionState::Disconnected, SessionState::Expired]);
        zk.restart().await;
        // The restarted server loads the session, then expires it: nobody reconnects.
        let observer = connect(&zk.connect_string(), Duration::from_secs(2)).await;
        until_gone(&observer, &format!("/held-{seq}"), Duration::from_secs(15)).await;
        assert_eq!(
            client.check_stat("/").await.unwrap_err(),
            Error::SessionExpired
        );
    })
    .await;
}

#[tokio::test]
async fn an_ensemble_elects_a_leader_and_survives_its_kill9() {
    bounded(async {
        let began = Instant::now();
        let ensemble = ZkEnsemble::start(3).await;
        eprintln!("ZkEnsemble::start(3) took {:?}", began.elapsed());
        assert_eq!(ensemble.len(), 3);
        let addrs: Vec<String> = ensemble
            .members()
            .iter()
            .map(ZkServer::connect_string)
            .collect();
        assert_eq!(ensemble.connect_string(), addrs.join(","));
        let mut modes = Vec::new();
        for (i, member) in ensemble.members().iter().enumerate() {
            assert_eq!(member.myid(), Some(i as u32 + 1));
            modes.push(member.mode().await.expect("every member serves"));
        }
        let leader = ensemble.leader().await;
        assert_eq!(modes[leader], "leader");
        assert_eq!(modes.iter().filter(|m| *m == "follower").count(), 2);

        let client = connect(&ensemble.connect_string(), Duration::from_secs(10)).await;
        let session = client.session_id();
        client
            .create("/config", b"before", &PERSISTENT)
            .await
            .unwrap();
        let (node, seq) = client
            .create("/held-", b"", &EPHEMERAL_SEQUENTIAL)
            .await
            .unwrap();

        // A paused follower leaves a quorum: writes go on.
        let follower = (leader + 1) % 3;
        ensemble.member(follower).pause();
        retrying("a write with a follower paused", || {
            client.set_data("/config", b"during pause", None)
        })
        .await;
        ensemble.member(follower).resume();
        ensemble.wait_until_serving().await;

        let began = Instant::now();
        ensemble.member(leader).kill9();
        let new_leader = ensemble.leader().await;
        eprintln!("a new leader after {:?}", began.elapsed());
        assert_ne!(new_leader, leader);
        let (data, _) = retrying("a read after the failover", || client.get_data("/config")).await;
        assert_eq!(data, b"during pause");
        retrying("a write after the failover", || {
            client.set_data("/config", b"after", None)
        })
        .await;
        assert_eq!(client.session_id(), session, "the session survives");
        let stat = retrying("a check after the failover", || {
            client.check_stat(&format!("/held-{seq}"))
        })
        .await
        .expect("the ephemeral node survives the failover");
        assert_eq!(stat.czxid, node.czxid);

        // The old leader comes back as a follower, with what was written while it was down.
        ensemble.member(leader).restart().await;
        assert_eq!(
            ensemble.member(leader).mode().await.as_deref(),
            Some("follower")
        );
        let direct = connect(
            &ensemble.member(leader).connect_string(),
            Duration::from_secs(4),
        )
        .await;
        let (data, _) = direct.get_data("/config").await.unwrap();
        assert_eq!(data, b"after");
    })
    .await;
}

#[test]
fn drop_kills_the_server_and_keeps_only_the_log_of_a_panicking_test() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (pid, dir) = runtime.block_on(async {
        let zk = ZkServer::start().await;
        (zk.pid().unwrap(), zk.dir().to_owned())
    });
    assert!(!process_exists(pid), "java pid {pid} outlived its ZkServer");
    assert!(!dir.exists(), "{} outlived its server", dir.display());

    let (tx, rx) = std::sync::mpsc::channel();
    let test = std::thread::spawn(move || {
        tokio::runtime::Runtime::new().unwrap().block_on(async {
            let zk = ZkServer::start().await;
            zk.pause(); // even a frozen one
            tx.send((zk.pid().unwrap(), zk.dir().to_owned(), zk.log_path()))
                .unwrap();
            panic!("a failing test");
        })
    });
    assert!(test.join().is_err());
    let (pid, dir, log) = rx.recv().unwrap();
    assert!(
        !process_exists(pid),
        "java pid {pid} outlived its panicking test"
    );
    assert!(log.is_file(), "the log of a failed test is kept");
    assert!(
        !dir.join("data").exists(),
        "the data of a failed test is not"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn handles_can_be_shared_with_fault_injecting_tasks() {
    fn shareable<T: Send + Sync + 'static>() {}
    shareable::<ZkServer>();
    shareable::<ZkEnsemble>();
}
