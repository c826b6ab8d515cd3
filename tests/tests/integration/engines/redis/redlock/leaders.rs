//! RedLock leader election with real servers: a leader cut off from a majority of the nodes
//! is replaced with a larger term, and observers see the change; a record on a minority of
//! the nodes is nobody's leadership.

use std::time::Duration;

use leasehold::Leader;
use leasehold_tests::harness::ProxyMode;
use redis::AsyncCommands;
use tokio::time::Instant;

use super::{locker_over, Cluster};

/// The leader's lease: renewed every 500 ms, lost within about 1.5 s of its last renewal (far
/// above a node's bound, so that a renewal delayed by a loaded machine still lands).
const LEASE: Duration = Duration::from_millis(1500);

/// Leader A, B and an observer run over links of their own. A's links to two of the three
/// nodes are cut: A loses its lease (its lock lapses there), B is elected with a larger term,
/// and the observer sees B, never a term going backwards, woken by the wake channels of the
/// nodes it reaches (it never polls in this test, and never reaches node 2).
///
/// B does not reach node 2 either, so that its majority is the observer's two nodes. Were B
/// to hold nodes 0 and 2 (A gives node 2 back when it sees its loss, which can be before its
/// lock lapses on node 1), the observer would see B's record on one node it reaches and
/// nothing on the other: it cannot tell whether B leads, and says so (an error), never
/// `None` (see `a_record_on_a_node_the_observer_cannot_reach_is_not_read_as_nobody`).
#[tokio::test]
async fn a_leader_that_loses_its_majority_is_replaced_and_observers_see_it() {
    let cluster = Cluster::start(3).await;
    let a_links = Cluster::proxies_to(&cluster.servers).await;
    let a = locker_over(&a_links).await;
    let b_links = Cluster::proxies_to(&cluster.servers).await;
    b_links[2].set_mode(ProxyMode::Cut);
    let b = locker_over(&b_links).await;
    // The observer never reaches node 2: it reads the other two (a majority) and must be
    // woken by their channels.
    let observer_links = Cluster::proxies_to(&cluster.servers).await;
    observer_links[2].set_mode(ProxyMode::Cut);
    let observer = locker_over(&observer_links).await;

    let first = a
        .leader("cut")
        .identity("a")
        .lease(LEASE)
        .campaign()
        .await
        .unwrap();
    let mut seen = observer
        .observe_leader("cut")
        .unwrap()
        // Longer than the test: every change must come by a node's wake-up.
        .poll_every(Duration::from_secs(60));
    let now = seen.next().await.unwrap().expect("a leader");
    assert_eq!((now.identity(), now.term()), ("a", first.term()));

    let second = tokio::spawn(async move {
        let leadership = b
            .leader("cut")
            .identity("b")
            .lease(LEASE)
            .wait(Duration::from_secs(15))
            .campaign()
            .await;
        (leadership, b)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!second.is_finished(), "b elected beside a");
    a_links[0].set_mode(ProxyMode::Cut);
    a_links[1].set_mode(ProxyMode::Cut);
    tokio::time::timeout(LEASE * 3, first.lost())
        .await
        .expect("a saw the loss of its majority");
    assert!(!first.is_leader());

    let deadline = Instant::now() + Duration::from_secs(15);
    let mut highest = now.term();
    // What the observer returned, for the message when B is not seen in time.
    let mut seen_meanwhile = Vec::new();
    let replaced: Leader = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(next) = tokio::time::timeout(left, seen.next()).await else {
            // Which side failed: b's election, or the observer's wake-up.
            let b = if second.is_finished() {
                match second.await.unwrap().0 {
                    Ok(l) => format!("b was elected with term {}", l.term()),
                    Err(e) => format!("b's campaign failed: {e:?}"),
                }
            } else {
                "b's campaign still waited".to_owned()
            };
            panic!("the observer did not see b within 15 s ({b}); it returned {seen_meanwhile:?}");
        };
        // While B's record is on node 0 and not yet on node 1, the observer cannot tell.
        let next = match next {
            Ok(next) => next,
            Err(e) => {
                assert!(e.is_unavailable(), "{e:?}");
                seen_meanwhile.push(format!("{e}"));
                continue;
            }
        };
        seen_meanwhile.push(format!("{next:?}"));
        if let Some(leader) = next {
            assert!(leader.term() >= highest, "a term went backwards");
            highest = leader.term();
            if leader.identity() == "b" {
                break leader;
            }
        }
    };
    let (leadership, _b) = second.await.unwrap();
    let leadership = leadership.expect("b elected");
    assert_eq!(replaced.term(), leadership.term());
    assert!(
        leadership.term() > first.term(),
        "term {} <= {}",
        leadership.term(),
        first.term()
    );
    leadership.resign().await.unwrap();
    // Cleared from node 0 before node 1, the record cannot be told apart for a moment.
    let after = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match seen.next().await {
                Ok(after) => break after,
                Err(e) => assert!(e.is_unavailable(), "{e:?}"),
            }
        }
    })
    .await
    .expect("the observer saw the resignation");
    assert_eq!(after, None);
}

/// Writes the record of leader "ghost" in term 7, with its token holding the lock, on one
/// node, as leader_publish.lua leaves them.
async fn place_ghost(server: &leasehold_tests::harness::RedisServer, election: &str) {
    let token = "0123456789abcdef0123456789abcdef";
    let mut conn = server.conn().await;
    let _: () = conn
        .set_ex(format!("leasehold:leader:lock:{{{election}}}"), token, 30)
        .await
        .unwrap();
    let _: () = conn
        .hset_multiple(
            format!("leasehold:leader:record:{{{election}}}"),
            &[("term", "7"), ("identity", "ghost"), ("owner", token)],
        )
        .await
        .unwrap();
}

/// An observer that reaches nodes 0 and 1 of three, while the leader's record is on nodes 0
/// and 2 (a majority): one node it reaches says "ghost", the other nothing, and the third may
/// say "ghost" too. It cannot tell, and says so (an error it may ask again after), never
/// `None`: that would tell a follower that nobody leads while ghost does. With nothing on
/// either node it reaches, nobody can lead (two of three say so), and it says `None`.
#[tokio::test]
async fn a_record_on_a_node_the_observer_cannot_reach_is_not_read_as_nobody() {
    let cluster = Cluster::start(3).await;
    let links = Cluster::proxies_to(&cluster.servers).await;
    links[2].set_mode(ProxyMode::Cut);
    let observer = locker_over(&links).await;

    place_ghost(&cluster.servers[2], "unreached").await;
    let mut seen = observer.observe_leader("unreached").unwrap();
    assert_eq!(seen.next().await.unwrap(), None, "nothing where it reads");

    place_ghost(&cluster.servers[0], "unreached").await;
    let mut seen = observer.observe_leader("unreached").unwrap();
    let unknown = seen.next().await;
    assert!(
        matches!(&unknown, Err(e) if e.is_unavailable()),
        "one node of two says ghost and the third did not answer: {unknown:?}"
    );

    place_ghost(&cluster.servers[1], "unreached").await;
    let leader = seen.next().await.unwrap().expect("two nodes it reaches");
    assert_eq!((leader.identity(), leader.term()), ("ghost", 7));
}

/// A record that a minority of the nodes hold (its token holding the lock there) is not a
/// leader: the observer reports `None`; the same record on a majority is the leader.
#[tokio::test]
async fn a_record_on_a_minority_of_the_nodes_is_nobodys_leadership() {
    let cluster = Cluster::start(3).await;
    let observer = cluster.locker().await;
    place_ghost(&cluster.servers[0], "minority").await;
    let mut seen = observer.observe_leader("minority").unwrap();
    assert_eq!(seen.next().await.unwrap(), None, "one node of three");
    place_ghost(&cluster.servers[1], "minority").await;
    let mut seen = observer.observe_leader("minority").unwrap();
    let leader = seen.next().await.unwrap().expect("two nodes of three");
    assert_eq!((leader.identity(), leader.term()), ("ghost", 7));
}
