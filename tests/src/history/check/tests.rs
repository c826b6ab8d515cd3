//! The checker fed hand-written logs: each rule caught where it is broken, and quiet on clean
//! histories of every kind of hold.

use crate::history::{History, Report, ResourceRecords, Rule, StoredWrite};

fn history(log: &str) -> History {
    History::parse(&[(0, log.to_owned())], "")
}

#[test]
fn a_clean_history_passes() {
    let h = history(
        "1 start 0 1 500 1000 300\n\
         10 inv 0.0.1 k\n20 ok 0.0.1 5\n21 chk 0.0.1 1\n22 win 0.0.1 5 1\n23 wok 0.0.1 1\n\
         30 rel 0.0.1 1\n31 rok 0.0.1\n\
         32 inv 0.0.2 k\n40 ok 0.0.2 6\n41 h 0.0.2\n50 rel 0.0.2 1\n51 rok 0.0.2\n60 end\n",
    );
    let r = h.check();
    assert!(r.violations.is_empty(), "{r}");
    assert_eq!((r.holds, r.writes_accepted), (2, 1));
}

#[test]
fn overlap_fence_order_and_stale_writes_are_caught() {
    let a = "1 start 0 1 500 1000 300\n10 inv 0.0.1 k\n20 ok 0.0.1 7\n21 h 0.0.1\n\
             45 h 0.0.1\n46 win 0.0.1 7 1\n47 wok 0.0.1 1\n50 rel 0.0.1 1\n51 rok 0.0.1\n60 end\n";
    // b holds (with an older fence) while a does, and writes after a's write landed.
    let b = "1 start 1 1 500 1000 300\n25 inv 1.0.1 k\n30 ok 1.0.1 6\n31 chk 1.0.1 1\n\
             48 win 1.0.1 6 1\n49 wok 1.0.1 1\n52 rel 1.0.1 1\n53 rok 1.0.1\n60 end\n";
    let h = History::parse(&[(0, a.into()), (1, b.into())], "");
    let r = h.check();
    let all = r
        .violations
        .iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(all.contains("overlap"), "{all}");
    assert!(all.contains("fence out of order"), "{all}");
    assert!(all.contains("stale write accepted"), "{all}");
}

#[test]
fn hangs_and_resurrections_are_caught() {
    let h = history(
        "1 start 0 1 500 1000 300\n10 inv 0.0.1 k\n20 ok 0.0.1 5\n21 h 0.0.1\n25 nh 0.0.1\n\
         30 h 0.0.1\n40 rel 0.0.1 1\n90 end\n",
    );
    let all = h
        .check()
        .violations
        .iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(all.contains("held again"), "{all}");
    assert!(all.contains("release of 0.0.1 never returned"), "{all}");
}

fn listed(r: &Report) -> String {
    r.violations
        .iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// One hold: invoked at `inv`, granted at `ok` with `fences`, believed held from `from`
/// to `to`, released after.
fn hold_lines(id: &str, keys: &str, mode: &str, times: [u64; 4], fences: &[u64]) -> String {
    let [inv, ok, from, to] = times;
    let list = fences
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let extra = if fences.len() > 1 {
        format!(" {list}")
    } else {
        String::new()
    };
    format!(
        "{inv} inv {id} {keys} {mode}\n{ok} ok {id} {} 1000{extra}\n{from} h {id}\n{to} h {id}\n\
         {} rel {id} 1\n{} rok {id}\n",
        fences[0],
        to + 1,
        to + 2
    )
}

fn worker_log(id: usize, tasks: usize, fair: bool, holds: &[String]) -> String {
    format!(
        "1 start {id} 1 500 1000 300 {tasks} {}\n{}999999999 end\n",
        u8::from(fair),
        holds.concat()
    )
}

#[test]
fn readers_share_and_a_writer_overlapping_a_reader_is_caught() {
    let r0 = hold_lines("0.0.1", "k", "r", [10, 20, 21, 50], &[5]);
    let r1 = hold_lines("1.0.1", "k", "r", [11, 22, 23, 40], &[5]);
    let clean = History::parse(
        &[
            (0, worker_log(0, 1, false, std::slice::from_ref(&r0))),
            (1, worker_log(1, 1, false, std::slice::from_ref(&r1))),
        ],
        "",
    )
    .check();
    assert!(clean.violations.is_empty(), "{clean}");
    assert_eq!(clean.read_holds, 2);

    let w = hold_lines("2.0.1", "k", "w", [25, 30, 31, 45], &[6]);
    let h = History::parse(
        &[
            (0, worker_log(0, 1, false, &[r0])),
            (1, worker_log(1, 1, false, &[r1])),
            (2, worker_log(2, 1, false, &[w])),
        ],
        "",
    );
    let r = h.check();
    let all = listed(&r);
    assert!(
        all.contains("overlap on `k`: 2.0.1 held it from 31 while 0.0.1"),
        "{all}"
    );
    assert!(!r.violations_of(Rule::Overlap).is_empty());
}

#[test]
fn a_multi_key_hold_counts_on_each_of_its_keys() {
    // 0.0.1 holds {a}:x and ключ together; 1.0.1 takes ключ alone while it does.
    let m = hold_lines("0.0.1", "%7Ba%7D:x,ключ", "x", [10, 20, 21, 50], &[5, 7]);
    let one = hold_lines("1.0.1", "ключ", "x", [25, 30, 31, 40], &[8]);
    let h = History::parse(
        &[
            (0, worker_log(0, 1, false, std::slice::from_ref(&m))),
            (1, worker_log(1, 1, false, &[one])),
        ],
        "",
    );
    assert_eq!(h.holds[0].keys, ["{a}:x", "ключ"]);
    assert_eq!(h.holds[0].fence_of("ключ"), Some(7));
    let r = h.check();
    let all = listed(&r);
    assert!(all.contains("overlap on `ключ`"), "{all}");
    assert!(!all.contains("overlap on `{a}:x`"), "{all}");
    assert_eq!(r.multi_holds, 1);

    // Its fence of each key takes part in that key's fence order: 1.0.1 asks after the
    // multi hold was granted, on the other key this time, and gets an older fence.
    let later = hold_lines("1.0.1", "%7Ba%7D:x", "x", [60, 70, 71, 80], &[4]);
    let r = History::parse(
        &[
            (0, worker_log(0, 1, false, &[m])),
            (1, worker_log(1, 1, false, &[later])),
        ],
        "",
    )
    .check();
    let all = listed(&r);
    assert!(all.contains("fence out of order on `{a}:x`"), "{all}");
}

#[test]
fn a_reader_must_carry_the_last_writers_fence() {
    let w = hold_lines("0.0.1", "k", "w", [10, 20, 21, 30], &[10]);
    let next = hold_lines("0.0.2", "k", "w", [60, 70, 71, 80], &[20]);
    let judge = |reader_fence: u64, tasks: usize, exact: bool| {
        let r = hold_lines("1.0.1", "k", "r", [15, 40, 41, 50], &[reader_fence]);
        let mut history = History::parse(
            &[
                (0, worker_log(0, tasks, false, &[w.clone(), next.clone()])),
                (1, worker_log(1, 1, false, &[r])),
            ],
            "",
        );
        history.exact_reader_fences = exact;
        history.check()
    };
    let run = |reader_fence: u64, tasks: usize| judge(reader_fence, tasks, true);
    // Without exact reader fences (Redis: the counter lifted to the server clock), only
    // the bounds are judged.
    assert!(judge(11, 1, false).violations.is_empty());
    assert!(!judge(9, 1, false).violations.is_empty());
    assert!(!judge(20, 1, false).violations.is_empty());
    assert!(run(10, 1).violations.is_empty(), "{}", run(10, 1));
    let below = listed(&run(9, 1));
    assert!(
        below.contains("reader 1.0.1 of `k` got fence 9 below 10 of writer 0.0.1"),
        "{below}"
    );
    let after = listed(&run(20, 1));
    assert!(after.contains("not below 20 of writer 0.0.2"), "{after}");
    let spare = listed(&run(11, 1));
    assert!(
        spare.contains("got fence 11, not 10 of the last writer 0.0.1"),
        "{spare}"
    );
    // A writer of a process with several tasks may have reserved spare fences for
    // handovers; the reader then sees the counter's top.
    let many = run(11, 4);
    assert!(many.violations.is_empty(), "{many}");
    assert!(!run(11, 1).violations_of(Rule::ReaderFence).is_empty());
}

#[test]
fn fair_grants_out_of_arrival_order_are_caught() {
    let ms = 1_000_000;
    // A asks at 10 ms, B at `b_inv` (the slack is 10 ms); the lock is busy until 50 ms; the fences follow
    // the grants, so only the FIFO rule can fire.
    let run = |b_inv: u64, a_ok: u64, b_ok: u64, fair: bool, expect: bool| {
        let (fa, fb) = if a_ok < b_ok { (5, 6) } else { (6, 5) };
        let a = hold_lines(
            "0.0.1",
            "k",
            "x",
            [10 * ms, a_ok, a_ok + 1, a_ok + ms],
            &[fa],
        );
        let b = hold_lines("1.0.1", "k", "x", [b_inv, b_ok, b_ok + 1, b_ok + ms], &[fb]);
        let mut h = History::parse(
            &[
                (0, worker_log(0, 1, fair, &[a])),
                (1, worker_log(1, 1, fair, &[b])),
            ],
            "",
        );
        h.expect_fifo = expect;
        h.check()
    };
    let in_order = run(30 * ms, 50 * ms, 60 * ms, true, true);
    assert!(in_order.violations.is_empty(), "{in_order}");
    assert_eq!(in_order.fifo_grants, 2);
    // B granted first while A still waited: out of order.
    let swapped = run(30 * ms, 60 * ms, 50 * ms, true, true);
    let fifo = swapped.violations_of(Rule::Fifo);
    assert_eq!(fifo.len(), 1, "{swapped}");
    assert!(
        fifo[0].what.contains("1 pair(s)")
            && fifo[0]
                .what
                .contains("1.0.1 was granted while 0.0.1, invoked 20.0 ms before it"),
        "{swapped}"
    );
    assert_eq!((swapped.fifo_pairs, swapped.fifo_overtaking), (1, 1));
    assert_eq!(swapped.violations.len(), 1, "{swapped}");
    // Measured but not judged when the run does not expect FIFO.
    let measured = run(30 * ms, 60 * ms, 50 * ms, true, false);
    assert!(measured.violations.is_empty(), "{measured}");
    assert_eq!(measured.fifo_pairs, 1);
    // Not fair locks: no order promised.
    let unfair = run(30 * ms, 60 * ms, 50 * ms, false, true);
    assert!(unfair.violations.is_empty(), "{unfair}");
    assert_eq!(unfair.fifo_grants, 0);
    // Within the slack: no order promised either.
    let close = run(12 * ms, 60 * ms, 50 * ms, true, true);
    assert!(close.violations.is_empty(), "{close}");
}

#[test]
fn a_clean_mixed_history_passes() {
    let ms = 1_000_000;
    // A writer, two readers sharing its fence, a multi-key hold over the key and another
    // one, then a fair single-key hold, in arrival order.
    let w = hold_lines("0.0.1", "k", "w", [ms, 2 * ms, 2 * ms + 1, 3 * ms], &[10]);
    let r1 = hold_lines(
        "1.0.1",
        "k",
        "r",
        [4 * ms, 5 * ms, 5 * ms + 1, 7 * ms],
        &[10],
    );
    let r2 = hold_lines(
        "2.0.1",
        "k",
        "r",
        [4 * ms, 6 * ms, 6 * ms + 1, 8 * ms],
        &[10],
    );
    let m = hold_lines(
        "0.0.2",
        "j,k",
        "x",
        [9 * ms, 10 * ms, 10 * ms + 1, 11 * ms],
        &[3, 11],
    );
    let f = hold_lines(
        "1.0.2",
        "k",
        "x",
        [12 * ms, 13 * ms, 13 * ms + 1, 14 * ms],
        &[12],
    );
    let mut h = History::parse(
        &[
            (0, worker_log(0, 1, false, &[w, m])),
            (1, worker_log(1, 1, true, &[r1, f])),
            (2, worker_log(2, 1, false, &[r2])),
        ],
        "",
    );
    h.expect_fifo = true;
    let r = h.check();
    assert!(r.violations.is_empty(), "{r}");
    assert_eq!((r.holds, r.read_holds, r.multi_holds), (5, 2, 1));
}

#[test]
fn more_permit_holders_than_permits_are_caught() {
    let log = |w: usize, from: u64, to: u64| {
        format!(
            "1 start {w} 1 500 1000 300\n2 sem 2\n{from} inv {w}.0.1 k\n{} ok {w}.0.1 {from} 0\n\
             {} h {w}.0.1\n{to} h {w}.0.1\n{} rel {w}.0.1 0\n{} rok {w}.0.1\n90 end\n",
            from + 1,
            from + 2,
            to + 1,
            to + 2
        )
    };
    // Two holders of two permits at once are fine; a third one at that instant is not.
    let two = History::parse(&[(0, log(0, 10, 40)), (1, log(1, 20, 50))], "");
    let r = two.check();
    assert!(r.violations.is_empty(), "{r}");
    assert_eq!(r.most_permit_holders, 2);
    let three = History::parse(
        &[
            (0, log(0, 10, 40)),
            (1, log(1, 20, 50)),
            (2, log(2, 30, 60)),
        ],
        "",
    );
    let r = three.check();
    assert_eq!(r.violations_of(Rule::Permits).len(), 1, "{r}");
    // Back to back (one's last belief before the other's first) is no overlap.
    let chained = History::parse(
        &[
            (0, log(0, 10, 40)),
            (1, log(1, 20, 50)),
            (2, log(2, 38, 60)),
        ],
        "",
    );
    assert_eq!(chained.check().violations_of(Rule::Permits).len(), 1);
    let after = History::parse(
        &[
            (0, log(0, 10, 40)),
            (1, log(1, 20, 50)),
            (2, log(2, 39, 60)),
        ],
        "",
    );
    assert!(after.check().violations.is_empty());
}

/// The fence rule holds for every kind of hold alike: fed histories in which only the
/// fence of a reader, a permit holder, a leader or one key of a multi-key hold goes
/// back (as a counter restored from an old snapshot, or expired, would make it), the
/// checker reports each.
#[test]
fn fences_go_back_for_no_kind_of_hold() {
    let ms = 1_000_000;
    let at = |n: u64| [n * ms, n * ms + 1, n * ms + 2, n * ms + 3];
    let judge = |logs: Vec<String>| {
        let logs: Vec<(usize, String)> = logs.into_iter().enumerate().collect();
        History::parse(&logs, "").check()
    };
    let fence_order = |r: &Report| {
        r.violations_of(Rule::FenceOrder)
            .iter()
            .map(|v| v.what.clone())
            .collect::<Vec<_>>()
    };

    // Readers: a reader after a reader (no writer in between) with a lower fence, as a
    // reader of a counter restored from a snapshot gets; equal fences are fine.
    let reader = |id: &str, n: u64, f: u64| hold_lines(id, "k", "r", at(n), &[f]);
    let w = hold_lines("0.0.1", "k", "w", at(1), &[100]);
    let ok = judge(vec![
        worker_log(0, 1, false, std::slice::from_ref(&w)),
        worker_log(
            1,
            1,
            false,
            &[reader("1.0.1", 2, 100), reader("1.0.2", 3, 100)],
        ),
    ]);
    assert!(ok.violations.is_empty(), "{ok}");
    let back = judge(vec![
        worker_log(0, 1, false, std::slice::from_ref(&w)),
        worker_log(
            1,
            1,
            false,
            &[reader("1.0.1", 2, 150), reader("1.0.2", 3, 7)],
        ),
    ]);
    assert_eq!(
        fence_order(&back),
        ["fence out of order on `k`: reader 1.0.1 got 150 before reader 1.0.2 asked, which got 7"],
        "{back}"
    );
    // A writer after a reader must be above it, not equal.
    let tie = judge(vec![
        worker_log(0, 1, false, &[reader("0.0.1", 1, 100)]),
        worker_log(1, 1, false, &[hold_lines("1.0.1", "k", "w", at(2), &[100])]),
    ]);
    assert_eq!(
        fence_order(&tie),
        ["fence out of order on `k`: reader 0.0.1 got 100 before 1.0.1 asked, which got 100"],
        "{tie}"
    );

    // Permits: each holder's fence above every earlier holder's, and unique.
    let permit = |w: usize, n: u64, f: u64| {
        format!(
            "1 start {w} 1 500 1000 300\n2 sem 3\n{}999999999 end\n",
            hold_lines(&format!("{w}.0.1"), "k", "x", at(n), &[f])
        )
    };
    let ok = judge(vec![permit(0, 1, 5), permit(1, 2, 6), permit(2, 3, 7)]);
    assert!(ok.violations.is_empty(), "{ok}");
    let ones = judge(vec![permit(0, 1, 1), permit(1, 2, 1)]);
    let ones = fence_order(&ones);
    assert!(
        ones.contains(&"fence 1 of semaphore `k` handed to both 0.0.1 and 1.0.1".to_owned())
            && ones.contains(
                &"fence out of order on semaphore `k`: 0.0.1 got 1 before 1.0.1 asked, which got 1"
                    .to_owned()
            ),
        "{ones:?}"
    );
    // A semaphore's counter is not the lock's of the same name.
    let apart = judge(vec![
        permit(0, 1, 50),
        worker_log(1, 1, false, &[hold_lines("1.0.1", "k", "x", at(2), &[10])]),
    ]);
    assert!(apart.violations.is_empty(), "{apart}");

    // Leader terms.
    let leader = |w: usize, n: u64, term: u64| {
        format!(
            "1 start {w} 1 500 1000 300\n2 ldr\n{}999999999 end\n",
            hold_lines(&format!("{w}.0.1"), "k", "x", at(n), &[term])
        )
    };
    let ok = judge(vec![leader(0, 1, 5), leader(1, 2, 6)]);
    assert!(ok.violations.is_empty(), "{ok}");
    let back = judge(vec![leader(0, 1, 6), leader(1, 2, 5)]);
    assert_eq!(
        fence_order(&back),
        ["fence out of order on election `k`: 0.0.1 got 6 before 1.0.1 asked, which got 5"],
        "{back}"
    );

    // One key of a multi-key hold behind a reader of that key.
    let m = hold_lines("1.0.1", "j,k", "x", at(3), &[9, 99]);
    let w = hold_lines("0.0.1", "k", "w", at(1), &[90]);
    let back = judge(vec![
        worker_log(0, 1, false, &[w, reader("0.0.2", 2, 100)]),
        worker_log(1, 1, false, &[m]),
    ]);
    assert_eq!(
        fence_order(&back),
        ["fence out of order on `k`: reader 0.0.2 got 100 before 1.0.1 asked, which got 99"],
        "{back}"
    );
}

/// A write as the store recorded it: `hold` read `read` and wrote one more, with `fence`.
fn stored(key: &str, hold: &str, n: usize, fence: u64, read: i64) -> StoredWrite {
    StoredWrite {
        key: key.to_owned(),
        hold: hold.to_owned(),
        n,
        fence,
        read,
        new: read + 1,
        order: None,
    }
}

/// A hold of `k` that updates it once: invoked at `at`, its read returning `read`, its write
/// ending as `outcome` says (`wok 1`, `wok 0`, `werr`).
fn updating(id: &str, at: u64, fence: u64, read: i64, outcome: &str) -> String {
    let outcome = match outcome.split_once(' ') {
        Some((event, flag)) => format!("{event} {id} {flag}"),
        None => format!("{outcome} {id}"),
    };
    format!(
        "{at} inv {id} k\n{} ok {id} {fence} 1000\n{} chk {id} 1\n{} win {id} {fence} 1\n\
         {} rd {id} {read}\n{} {outcome}\n{} rel {id} 1\n{} rok {id}\n",
        at + 1,
        at + 2,
        at + 3,
        at + 4,
        at + 5,
        at + 6,
        at + 7
    )
}

fn judged(logs: &[String], records: ResourceRecords) -> Report {
    let logs: Vec<(usize, String)> = logs.iter().cloned().enumerate().collect();
    let mut h = History::parse(&logs, "");
    h.resource = Some(Ok(records));
    h.check()
}

fn records(value: i64, writes: Vec<StoredWrite>) -> ResourceRecords {
    ResourceRecords {
        values: [("k".to_owned(), value)].into(),
        writes,
    }
}

fn log_of(w: usize, holds: &[String]) -> String {
    format!(
        "1 start {w} 1 500 1000 300 1 0\n2 res redis claim 2\n{}999999999 end\n",
        holds.concat()
    )
}

#[test]
fn updates_that_chain_pass() {
    // Four writes, each from the value the one before left; the counter is 4.
    let logs = [
        log_of(
            0,
            &[
                updating("0.0.1", 10, 5, 0, "wok 1"),
                updating("0.0.2", 30, 7, 2, "wok 1"),
            ],
        ),
        log_of(
            1,
            &[
                updating("1.0.1", 20, 6, 1, "wok 1"),
                updating("1.0.2", 40, 8, 3, "wok 1"),
            ],
        ),
    ];
    let writes = vec![
        stored("k", "0.0.1", 0, 5, 0),
        stored("k", "1.0.1", 0, 6, 1),
        stored("k", "0.0.2", 0, 7, 2),
        stored("k", "1.0.2", 0, 8, 3),
    ];
    let r = judged(&logs, records(4, writes));
    assert!(r.violations.is_empty(), "{r}");
    assert_eq!((r.store_read, r.store_writes, r.lost_updates), (true, 4, 0));
    assert_eq!(r.holds, 4);
    assert!(
        r.to_string()
            .contains("store kept 4 writes (0 lost updates)"),
        "{r}"
    );
}

#[test]
fn a_lost_update_is_caught_and_names_both_holders_and_their_fences() {
    // w0.0.3 (fence 33) wrote 5 from 4; w1.0.7 (fence 65) read 4 before that write landed,
    // and its write was accepted too: the counter is 5 after 6 writes.
    let mut writes: Vec<StoredWrite> = (0..4)
        .map(|i| stored("k", &format!("2.0.{}", i + 1), 0, 10 + i as u64, i))
        .collect();
    writes.push(stored("k", "1.0.7", 0, 65, 4));
    writes.push(stored("k", "0.0.3", 0, 33, 4));
    let logs = [
        log_of(0, &[updating("0.0.3", 50, 33, 4, "wok 1")]),
        log_of(1, &[updating("1.0.7", 60, 65, 4, "wok 1")]),
    ];
    let r = judged(&logs, records(5, writes));
    let lost = r.violations_of(Rule::LostUpdate);
    assert_eq!(r.lost_updates, 1, "{r}");
    assert_eq!(
        lost[0].what,
        "lost update on `k`: w1.0.7 (fence 65) wrote 5 computed from 4, as w0.0.3 (fence 33) had"
    );
    // The counter went up once for the two: the lost update says it all.
    assert_eq!(lost.len(), 1, "{r}");
    // A counter past its recorded writes: something wrote without its record.
    let r = judged(
        &[],
        records(
            3,
            vec![stored("k", "0.0.1", 0, 5, 0), stored("k", "0.0.2", 0, 6, 1)],
        ),
    );
    assert_eq!(
        listed(&r),
        "LostUpdate: the records of `k` do not add up: its counter is 3 after 2 accepted \
         writes, which read 0, 1"
    );
    // Where the store numbers its writes, its order names who was first, not the fences.
    let mut writes = vec![
        stored("k", "0.0.3", 0, 33, 0),
        stored("k", "1.0.7", 0, 65, 0),
    ];
    writes[0].order = Some(2);
    writes[1].order = Some(1);
    let r = judged(&logs, records(1, writes));
    assert_eq!(
        r.violations_of(Rule::LostUpdate)[0].what,
        "lost update on `k`: w0.0.3 (fence 33) wrote 1 computed from 0, as w1.0.7 (fence 65) had"
    );
}

#[test]
fn a_write_its_client_saw_fail_counts_when_the_store_has_it() {
    // 0.0.1's write timed out on its client (werr), but the store applied it: 1.0.1 read
    // what it left, and the counter is 2. Judged by the logs alone, 1.0.1's read of 1 would
    // have no write behind it.
    let logs = [
        log_of(0, &[updating("0.0.1", 10, 5, 0, "werr")]),
        log_of(1, &[updating("1.0.1", 20, 6, 1, "wok 1")]),
    ];
    let applied = vec![stored("k", "0.0.1", 0, 5, 0), stored("k", "1.0.1", 0, 6, 1)];
    let r = judged(&logs, records(2, applied));
    assert!(r.violations.is_empty(), "{r}");
    assert_eq!((r.store_writes, r.writes_failed), (2, 1));
    // The same write, and a next holder that read past it: a lost update, though its
    // client was never told the first write happened.
    let logs = [
        log_of(0, &[updating("0.0.1", 10, 5, 0, "werr")]),
        log_of(1, &[updating("1.0.1", 20, 6, 0, "wok 1")]),
    ];
    let twice = vec![stored("k", "0.0.1", 0, 5, 0), stored("k", "1.0.1", 0, 6, 0)];
    let r = judged(&logs, records(1, twice));
    assert_eq!(r.lost_updates, 1, "{r}");
    assert!(
        r.violations_of(Rule::LostUpdate)[0].what.starts_with(
            "lost update on `k`: w1.0.1 (fence 6) wrote 1 computed from 0, as w0.0.1 (fence 5) had"
        ),
        "{r}"
    );
}

#[test]
fn the_clients_view_must_match_the_stores() {
    // Acknowledged, but not in the store; refused, but applied.
    let logs = [
        log_of(0, &[updating("0.0.1", 10, 5, 0, "wok 1")]),
        log_of(1, &[updating("1.0.1", 20, 6, 0, "wok 0")]),
    ];
    let r = judged(&logs, records(1, vec![stored("k", "1.0.1", 0, 6, 0)]));
    let all = listed(&r);
    assert!(
        all.contains("write 0 of w0.0.1 was acknowledged to it, but the store has no record of it"),
        "{all}"
    );
    assert!(
        all.contains("write 0 of w1.0.1 was refused to it, but the store applied it"),
        "{all}"
    );
    // A store that could not be read fails the run; one nobody read is not judged.
    let logs: Vec<(usize, String)> = vec![(0, log_of(0, &[updating("0.0.1", 10, 5, 0, "wok 1")]))];
    let mut h = History::parse(&logs, "");
    let r = h.check();
    assert!(r.violations.is_empty() && !r.store_read, "{r}");
    assert!(r.to_string().contains("store not read"), "{r}");
    h.resource = Some(Err("connection refused".to_owned()));
    let r = h.check();
    assert_eq!(
        listed(&r),
        "Log: the resource's records could not be read: connection refused"
    );
    // The `rd` of a write is read back with it.
    assert_eq!(
        h.holds[0].writes[0].read.as_ref().map(|r| &r.1[..]),
        Some(&[0][..])
    );
    assert_eq!(
        h.workers[0].resource,
        Some(("redis".into(), "claim".into(), 2))
    );
}
