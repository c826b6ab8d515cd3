//! Why RedLock has no semaphores. A semaphore on RedLock would be one on each node (each
//! counting its holders against the limit), and a holder admitted when a majority of nodes
//! admitted it, as a lock is. That is unsafe: a node only sees the holders that asked it, and
//! different majorities overlap in too few nodes to see each other. Limit 2 on 3 nodes:
//! A is admitted by nodes 1 and 2, B by 2 and 3, C by 1 and 3; every node counts 2 holders,
//! within the limit, and 3 hold permits. In general each node admits `limit` holders and
//! each holder needs `N/2 + 1` nodes, so up to `limit × N / (N/2 + 1)` hold at once: more
//! than the limit from a limit of 2 on. (A limit of 1 is the lock: one holder, by quorum
//! intersection.) Counting right needs one count that every grant agrees on, which is
//! consensus: a semaphore belongs on ZooKeeper, etcd or PostgreSQL, not on independent
//! masters. The tests below run the rule on the counterexample, so the argument cannot rot.

#[cfg(test)]
mod tests {
    /// The rule a per-node semaphore under majority agreement would follow: each node asked
    /// admits the holder while it counts fewer than `limit`; the holder is admitted when a
    /// majority of the `counts.len()` nodes did.
    fn admitted(counts: &mut [u32], limit: u32, asked: &[usize]) -> bool {
        let mut yes = 0;
        for &node in asked {
            if counts[node] < limit {
                counts[node] += 1;
                yes += 1;
            }
        }
        yes > counts.len() / 2
    }

    #[test]
    fn limit_two_on_three_nodes_admits_three_holders() {
        let mut counts = [0; 3];
        let holders = [[0, 1], [1, 2], [0, 2]]; // A, B, C
        let admitted = holders
            .iter()
            .filter(|asked| admitted(&mut counts, 2, &asked[..]))
            .count();
        assert_eq!(counts, [2, 2, 2], "every node within the limit");
        assert_eq!(admitted, 3, "three holders of a limit of two");
    }

    /// The bound of the module header is reached: `limit × N / quorum` holders, each on a
    /// majority of its own, no node above the limit; more than the limit whenever the limit
    /// is 2 or more, exactly 1 for a limit of 1 (the lock).
    #[test]
    fn majorities_admit_up_to_limit_times_n_over_the_quorum() {
        for n in [3usize, 5, 7] {
            let quorum = n / 2 + 1;
            for limit in 1..=4u32 {
                let most = limit as usize * n / quorum;
                let mut counts = vec![0; n];
                // Holder i asks the quorum nodes after the previous holder's, round the ring,
                // which spreads the holders evenly over the nodes.
                let admitted = (0..most)
                    .filter(|i| {
                        let asked: Vec<usize> = (0..quorum).map(|j| (i * quorum + j) % n).collect();
                        admitted(&mut counts, limit, &asked)
                    })
                    .count();
                assert_eq!(admitted, most, "n {n}, limit {limit}");
                assert!(counts.iter().all(|&c| c <= limit));
                if limit >= 2 {
                    assert!(admitted > limit as usize, "n {n}, limit {limit}");
                } else {
                    assert_eq!(admitted, 1, "a limit of one is the lock");
                }
            }
        }
    }
}
