//! Tests of the harness itself, against real `redis-server` processes: if these fail, every
//! fault test built on the harness would lie.

use std::future::Future;
use std::time::{Duration, Instant};

use leasehold_tests::harness::{
    cargo_bin, ConnKind, Held, ProxyMode, RedisOptions, RedisServer, TcpProxy,
};
use redis::aio::MultiplexedConnection;
use redis::{PushInfo, PushKind};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::timeout;

/// Every test body runs under this bound, so a harness bug fails the test instead of hanging CI.
async fn bounded<F: Future<Output = ()>>(test: F) {
    timeout(Duration::from_secs(60), test)
        .await
        .expect("the test did not finish within 60s");
}

async fn ping(conn: &mut MultiplexedConnection) -> redis::RedisResult<String> {
    redis::cmd("PING").query_async(conn).await
}

async fn set(conn: &mut MultiplexedConnection, key: &str, value: &str) {
    redis::cmd("SET")
        .arg(key)
        .arg(value)
        .query_async::<()>(conn)
        .await
        .unwrap();
}

async fn connect(url: &str) -> redis::RedisResult<MultiplexedConnection> {
    redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await
}

fn process_exists(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the pid exists.
    unsafe { libc::kill(pid as libc::pid_t, 0) == 0 }
}

#[tokio::test]
async fn start_answers_ping_on_its_url() {
    bounded(async {
        let srv = RedisServer::start().await;
        assert_eq!(srv.url(), format!("redis://127.0.0.1:{}", srv.port()));
        assert_eq!(srv.addr().port(), srv.port());
        assert!(srv.addr().ip().is_loopback());
        assert_eq!(ping(&mut srv.conn().await).await.unwrap(), "PONG");
        let persistence: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("save")
            .query_async(&mut srv.conn().await)
            .await
            .unwrap();
        assert_eq!(persistence, ["save", ""]);
    })
    .await;
}

#[tokio::test]
async fn start_with_passes_extra_arguments() {
    bounded(async {
        let srv = RedisServer::start_with(
            RedisOptions::default()
                .arg("--maxmemory-policy")
                .arg("noeviction"),
        )
        .await;
        let policy: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("maxmemory-policy")
            .query_async(&mut srv.conn().await)
            .await
            .unwrap();
        assert_eq!(policy, ["maxmemory-policy", "noeviction"]);
    })
    .await;
}

#[tokio::test]
#[should_panic(expected = "did not start")]
async fn a_server_that_cannot_start_panics_with_its_log() {
    RedisServer::start_with(RedisOptions::default().arg("--no-such-directive").arg("1")).await;
}

#[tokio::test]
async fn servers_started_together_are_separate() {
    bounded(async {
        let servers = RedisServer::start_many(3).await;
        let mut ports: Vec<u16> = servers.iter().map(RedisServer::port).collect();
        ports.sort();
        ports.dedup();
        assert_eq!(ports.len(), 3, "ports must differ: {ports:?}");
        set(&mut servers[0].conn().await, "only-on-first", "1").await;
        assert_eq!(servers[0].keys("*").await, ["only-on-first"]);
        assert!(servers[1].keys("*").await.is_empty());
        assert!(servers[2].keys("*").await.is_empty());
    })
    .await;
}

#[tokio::test]
async fn kill9_makes_connecting_fail() {
    bounded(async {
        let srv = RedisServer::start().await;
        let pid = srv.pid().expect("a started server runs");
        srv.kill9();
        assert_eq!(srv.pid(), None);
        assert!(!process_exists(pid), "pid {pid} is still there after kill9");
        let attempt = timeout(Duration::from_secs(5), connect(&srv.url())).await;
        assert!(
            matches!(attempt, Ok(Err(_))),
            "connecting to a killed server must fail at once"
        );
        srv.kill9(); // idempotent
    })
    .await;
}

#[tokio::test]
async fn pause_freezes_and_resume_thaws() {
    bounded(async {
        let srv = RedisServer::start().await;
        let mut conn = srv.conn().await;
        srv.pause();
        let frozen = timeout(Duration::from_millis(300), ping(&mut conn)).await;
        assert!(frozen.is_err(), "a paused server answered: {frozen:?}");
        srv.resume();
        assert_eq!(
            timeout(Duration::from_secs(2), ping(&mut conn))
                .await
                .unwrap()
                .unwrap(),
            "PONG"
        );
    })
    .await;
}

#[tokio::test]
async fn restart_keeps_the_port_and_drops_the_data() {
    bounded(async {
        let srv = RedisServer::start().await;
        let port = srv.port();
        let first_pid = srv.pid();
        set(&mut srv.conn().await, "before-restart", "1").await;
        srv.restart().await;
        assert_eq!(srv.port(), port);
        assert_ne!(srv.pid(), first_pid);
        assert!(srv.keys("*").await.is_empty());
        assert_eq!(ping(&mut srv.conn().await).await.unwrap(), "PONG");

        // Also after a kill or a graceful stop.
        srv.kill9();
        srv.restart().await;
        srv.stop();
        assert_eq!(srv.pid(), None);
        srv.restart().await;
        assert_eq!(ping(&mut srv.conn().await).await.unwrap(), "PONG");
    })
    .await;
}

#[tokio::test]
async fn a_paused_server_can_be_stopped_and_restarted() {
    bounded(async {
        let srv = RedisServer::start().await;
        srv.pause();
        srv.stop();
        srv.restart().await;
        assert_eq!(ping(&mut srv.conn().await).await.unwrap(), "PONG");
    })
    .await;
}

#[test]
fn drop_kills_the_process_and_removes_its_directory_even_on_panic() {
    let (tx, rx) = std::sync::mpsc::channel();
    let test = std::thread::spawn(move || {
        tokio::runtime::Runtime::new().unwrap().block_on(async {
            let srv = RedisServer::start().await;
            srv.pause(); // even a frozen one
            tx.send((srv.pid().unwrap(), srv.dir().to_owned())).unwrap();
            panic!("a failing test");
        })
    });
    assert!(test.join().is_err());
    let (pid, dir) = rx.recv().unwrap();
    assert!(
        !process_exists(pid),
        "redis-server pid {pid} outlived its panicking test"
    );
    assert!(!dir.exists(), "{} outlived its server", dir.display());
}

#[tokio::test]
async fn keys_lists_matches_via_scan() {
    bounded(async {
        let srv = RedisServer::start().await;
        let mut conn = srv.conn().await;
        for key in ["lock:b", "lock:a", "fence:a"] {
            set(&mut conn, key, "x").await;
        }
        assert_eq!(srv.keys("lock:*").await, ["lock:a", "lock:b"]);
        assert_eq!(srv.keys("*").await.len(), 3);
        assert!(srv.keys("nothing:*").await.is_empty());
    })
    .await;
}

#[tokio::test]
async fn info_stat_reads_counters() {
    bounded(async {
        let srv = RedisServer::start().await;
        let mut conn = srv.conn().await;
        assert_eq!(srv.info_stat("cmdstat_set").await, 0);
        let before = srv.info_stat("total_commands_processed").await;
        set(&mut conn, "a", "1").await;
        set(&mut conn, "b", "2").await;
        let after = srv.info_stat("total_commands_processed").await;
        // The two SETs and the first probe's INFO, which is counted after it reports.
        assert_eq!(after - before, 3);
        assert_eq!(srv.info_stat("cmdstat_set").await, 2);
        assert_eq!(srv.info_stat("cmdstat_set.failed_calls").await, 0);
        assert_eq!(srv.info_stat("db0").await, 2);
        assert!(srv.info_stat("connected_clients").await >= 1);
    })
    .await;
}

#[tokio::test]
async fn proxy_passes_and_delays() {
    bounded(async {
        let srv = RedisServer::start().await;
        let proxy = TcpProxy::start(srv.addr()).await;
        assert_eq!(proxy.target(), srv.addr());
        assert_eq!(proxy.mode(), ProxyMode::Pass);
        let mut conn = connect(&proxy.url()).await.unwrap();
        assert_eq!(ping(&mut conn).await.unwrap(), "PONG");

        let delay = Duration::from_millis(100);
        proxy.set_mode(ProxyMode::Delay(delay));
        let sent = Instant::now();
        assert_eq!(ping(&mut conn).await.unwrap(), "PONG");
        let took = sent.elapsed();
        assert!(
            took >= 2 * delay,
            "a PING took {took:?}, but request and reply are each delayed {delay:?}"
        );

        proxy.set_mode(ProxyMode::Pass);
        assert_eq!(ping(&mut conn).await.unwrap(), "PONG");
    })
    .await;
}

#[tokio::test]
async fn proxy_stall_holds_bytes_until_the_mode_changes() {
    bounded(async {
        let srv = RedisServer::start().await;
        let proxy = TcpProxy::start(srv.addr()).await;
        let mut conn = connect(&proxy.url()).await.unwrap();
        let mut raw = TcpStream::connect(proxy.addr()).await.unwrap();
        proxy.set_mode(ProxyMode::Stall);

        let stalled = timeout(Duration::from_millis(300), ping(&mut conn)).await;
        assert!(
            stalled.is_err(),
            "a stalled proxy let a PING through: {stalled:?}"
        );

        raw.write_all(b"PING\r\n").await.unwrap();
        let mut reply = [0; 7];
        let held = timeout(Duration::from_millis(300), raw.read_exact(&mut reply)).await;
        assert!(held.is_err(), "a stalled proxy forwarded a reply");
        proxy.set_mode(ProxyMode::Pass);
        timeout(Duration::from_secs(2), raw.read_exact(&mut reply))
            .await
            .expect("held bytes are forwarded once the stall ends")
            .unwrap();
        assert_eq!(&reply, b"+PONG\r\n");

        let mut fresh = connect(&proxy.url()).await.unwrap();
        assert_eq!(ping(&mut fresh).await.unwrap(), "PONG");
    })
    .await;
}

/// The value of `key` read straight from the server, past the proxy.
async fn read_direct(srv: &RedisServer, key: &str) -> Option<i64> {
    let mut conn = srv.conn().await;
    redis::cmd("GET")
        .arg(key)
        .query_async(&mut conn)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_held_request_reaches_the_server_only_after_its_client_gave_up() {
    bounded(async {
        let srv = RedisServer::start().await;
        let proxy = TcpProxy::start(srv.addr()).await;
        let mut caught = connect(&proxy.url()).await.unwrap();
        let mut other = connect(&proxy.url()).await.unwrap();
        proxy.hold_next_sending(b"held-key", Held::Requests);

        let mut incr = redis::cmd("INCR");
        incr.arg("held-key");
        let gave_up = timeout(
            Duration::from_millis(300),
            incr.query_async::<i64>(&mut caught),
        )
        .await;
        assert!(gave_up.is_err(), "a held request was answered: {gave_up:?}");
        assert_eq!(proxy.caught(), 1);
        // Only the connection that sent it is held; the server has not seen it.
        assert_eq!(ping(&mut other).await.unwrap(), "PONG");
        assert_eq!(read_direct(&srv, "held-key").await, None);

        proxy.release_held();
        // Applied now, after its client gave up on it: the connection carries it still.
        let until = Instant::now() + Duration::from_secs(5);
        while read_direct(&srv, "held-key").await.is_none() {
            assert!(Instant::now() < until, "the released request never landed");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(read_direct(&srv, "held-key").await, Some(1));
        // The trap caught one connection only: the next INCR passes at once.
        let next: i64 = redis::cmd("INCR")
            .arg("held-key")
            .query_async(&mut other)
            .await
            .unwrap();
        assert_eq!(next, 2);
    })
    .await;
}

#[tokio::test]
async fn a_trap_for_the_second_request_lets_the_first_through_and_a_released_connection_is_caught_again(
) {
    bounded(async {
        let srv = RedisServer::start().await;
        let proxy = TcpProxy::start(srv.addr()).await;
        let mut conn = connect(&proxy.url()).await.unwrap();
        proxy.hold_nth_sending(b"nth-key", 2, Held::Requests);
        let first: i64 = redis::cmd("INCR")
            .arg("nth-key")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!((first, proxy.caught()), (1, 0));
        let mut incr = redis::cmd("INCR");
        incr.arg("nth-key");
        let held = timeout(
            Duration::from_millis(300),
            incr.query_async::<i64>(&mut conn),
        )
        .await;
        assert!(held.is_err(), "the second request was answered: {held:?}");
        assert_eq!(proxy.caught(), 1);
        assert_eq!(read_direct(&srv, "nth-key").await, Some(1));
        proxy.release_held();
        // Delivered, the connection can be caught again by the next trap.
        let until = Instant::now() + Duration::from_secs(5);
        while read_direct(&srv, "nth-key").await != Some(2) {
            assert!(Instant::now() < until, "the released request never landed");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        proxy.hold_next_sending(b"nth-key", Held::Requests);
        let mut incr = redis::cmd("INCR");
        incr.arg("nth-key");
        let held = timeout(
            Duration::from_millis(300),
            incr.query_async::<i64>(&mut conn),
        )
        .await;
        assert!(held.is_err(), "the third request was answered: {held:?}");
        assert_eq!(proxy.caught(), 2);
        assert_eq!(read_direct(&srv, "nth-key").await, Some(2));
        proxy.release_held();
    })
    .await;
}

#[tokio::test]
async fn a_held_reply_is_lost_when_its_connection_is_cut_but_the_call_was_applied() {
    bounded(async {
        let srv = RedisServer::start().await;
        let proxy = TcpProxy::start(srv.addr()).await;
        let mut conn = connect(&proxy.url()).await.unwrap();
        proxy.hold_next_sending(b"applied-key", Held::Replies);
        let mut incr = redis::cmd("INCR");
        incr.arg("applied-key");
        let late = timeout(
            Duration::from_millis(300),
            incr.query_async::<i64>(&mut conn),
        )
        .await;
        assert!(late.is_err(), "a held reply arrived: {late:?}");
        // The server applied it: only the answer is missing.
        assert_eq!(read_direct(&srv, "applied-key").await, Some(1));
        proxy.cut_held();
        let after = timeout(Duration::from_secs(2), ping(&mut conn)).await;
        assert!(
            matches!(after, Ok(Err(_))),
            "a cut connection still answered: {after:?}"
        );
        let mut fresh = connect(&proxy.url()).await.unwrap();
        assert_eq!(ping(&mut fresh).await.unwrap(), "PONG");
    })
    .await;
}

#[tokio::test]
async fn proxy_cut_closes_connections_until_pass() {
    bounded(async {
        let srv = RedisServer::start().await;
        let proxy = TcpProxy::start(srv.addr()).await;
        let mut conn = connect(&proxy.url()).await.unwrap();
        assert_eq!(ping(&mut conn).await.unwrap(), "PONG");

        proxy.set_mode(ProxyMode::Cut);
        let cut = timeout(Duration::from_secs(2), ping(&mut conn)).await;
        assert!(
            matches!(cut, Ok(Err(_))),
            "a PING over a cut connection must fail: {cut:?}"
        );
        let refused = timeout(Duration::from_secs(2), async {
            let mut conn = connect(&proxy.url()).await?;
            ping(&mut conn).await
        })
        .await;
        assert!(
            matches!(refused, Ok(Err(_))),
            "a new connection through a cut proxy must fail: {refused:?}"
        );

        proxy.set_mode(ProxyMode::Pass);
        let mut fresh = connect(&proxy.url()).await.unwrap();
        assert_eq!(ping(&mut fresh).await.unwrap(), "PONG");
    })
    .await;
}

/// A RESP3 connection through `url` that subscribes to `channel`, with its pushes (messages
/// and the notice of its own disconnection): as leasehold's wake-up connection is made.
async fn subscriber(
    url: &str,
    channel: &str,
) -> redis::RedisResult<(MultiplexedConnection, UnboundedReceiver<PushInfo>)> {
    let (pushes, received) = tokio::sync::mpsc::unbounded_channel();
    let config = redis::AsyncConnectionConfig::new().set_push_sender(pushes);
    let mut conn = redis::Client::open(format!("{url}?protocol=resp3"))?
        .get_multiplexed_async_connection_with_config(&config)
        .await?;
    conn.subscribe(channel).await?;
    Ok((conn, received))
}

/// The next push of `kind`, within `within`.
async fn next_push(
    pushes: &mut UnboundedReceiver<PushInfo>,
    kind: PushKind,
    within: Duration,
) -> Option<PushInfo> {
    timeout(within, async {
        while let Some(push) = pushes.recv().await {
            if push.kind == kind {
                return Some(push);
            }
        }
        None
    })
    .await
    .ok()
    .flatten()
}

/// A connection that subscribed is told apart from one that runs commands, also when it is
/// new: a mode set for one kind leaves the other alone.
#[tokio::test]
async fn proxy_modes_apply_to_one_kind_of_connection() {
    bounded(async {
        let srv = RedisServer::start().await;
        let proxy = TcpProxy::start(srv.addr()).await;
        let mut commands = connect(&proxy.url()).await.unwrap();
        let (mut sub, mut pushes) = subscriber(&proxy.url(), "news").await.unwrap();
        assert_eq!(srv.subscribers("news").await, 1);
        let publish = |message: &'static str| {
            let srv = &srv;
            async move {
                redis::cmd("PUBLISH")
                    .arg("news")
                    .arg(message)
                    .query_async::<i64>(&mut srv.conn().await)
                    .await
                    .unwrap()
            }
        };

        // Subscriptions stalled: commands pass, the subscriber hears nothing.
        proxy.set_mode_for(ConnKind::Subscription, ProxyMode::Stall);
        assert_eq!(proxy.mode_for(ConnKind::Subscription), ProxyMode::Stall);
        assert_eq!(proxy.mode(), ProxyMode::Pass);
        assert_eq!(ping(&mut commands).await.unwrap(), "PONG");
        publish("held").await;
        let held = next_push(&mut pushes, PushKind::Message, Duration::from_millis(300)).await;
        assert!(
            held.is_none(),
            "a stalled subscription connection got {held:?}"
        );
        proxy.set_mode_for(ConnKind::Subscription, ProxyMode::Pass);
        assert!(
            next_push(&mut pushes, PushKind::Message, Duration::from_secs(2))
                .await
                .is_some(),
            "held bytes are forwarded once the stall ends"
        );

        // Commands stalled: the subscriber still hears what is published (on a connection that
        // is not behind the proxy), and a new subscriber is recognised at its SUBSCRIBE.
        proxy.set_mode_for(ConnKind::Command, ProxyMode::Stall);
        let stalled = timeout(Duration::from_millis(300), ping(&mut commands)).await;
        assert!(stalled.is_err(), "a stalled command connection answered");
        publish("through").await;
        assert!(
            next_push(&mut pushes, PushKind::Message, Duration::from_secs(2))
                .await
                .is_some()
        );
        proxy.set_mode_for(ConnKind::Command, ProxyMode::Pass);
        assert_eq!(
            timeout(Duration::from_secs(2), ping(&mut commands))
                .await
                .expect("held bytes are forwarded once the stall ends")
                .unwrap(),
            "PONG"
        );

        // Subscriptions cut: the subscribed connection is closed, commands go on, and a new
        // connection is closed as soon as it subscribes.
        proxy.set_mode_for(ConnKind::Subscription, ProxyMode::Cut);
        assert!(
            next_push(&mut pushes, PushKind::Disconnection, Duration::from_secs(2))
                .await
                .is_some(),
            "a cut subscription connection stayed open"
        );
        assert!(sub.subscribe("more").await.is_err());
        assert_eq!(ping(&mut commands).await.unwrap(), "PONG");
        let refused = timeout(Duration::from_secs(2), subscriber(&proxy.url(), "news")).await;
        assert!(
            matches!(refused, Ok(Err(_))),
            "a connection subscribed through a cut: {:?}",
            refused.map(|r| r.map(|_| ()))
        );
        proxy.set_mode(ProxyMode::Pass);
        let (_back, mut pushes) = subscriber(&proxy.url(), "news").await.unwrap();
        assert_eq!(srv.subscribers("news").await, 1);
        publish("back").await;
        assert!(
            next_push(&mut pushes, PushKind::Message, Duration::from_secs(2))
                .await
                .is_some()
        );
        assert_eq!(ping(&mut commands).await.unwrap(), "PONG");
    })
    .await;
}

#[tokio::test]
async fn a_stopped_proxy_refuses_connections() {
    bounded(async {
        let srv = RedisServer::start().await;
        let proxy = TcpProxy::start(srv.addr()).await;
        let url = proxy.url();
        let mut conn = connect(&url).await.unwrap();
        drop(proxy);
        let after = timeout(Duration::from_secs(2), ping(&mut conn)).await;
        assert!(
            matches!(after, Ok(Err(_))),
            "a connection through a dropped proxy must fail: {after:?}"
        );
        let attempt = timeout(Duration::from_secs(2), connect(&url)).await;
        assert!(matches!(attempt, Ok(Err(_))));
    })
    .await;
}

#[test]
fn handles_can_be_shared_with_fault_injecting_tasks() {
    fn shareable<T: Send + Sync + 'static>() {}
    shareable::<RedisServer>();
    shareable::<TcpProxy>();
}

#[test]
#[should_panic(expected = "no binary `no-such-binary`")]
fn cargo_bin_names_a_missing_binary() {
    cargo_bin("no-such-binary");
}
