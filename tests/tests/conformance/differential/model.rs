//! The model's own logic, on hand-made traces.

use super::fault::{Fault, On, Window};
use super::judge::{hit_by, longest_gap, outlives_hold, reasons_for, SETTLE};
use super::run::{Outcome, Record};
use super::schedule::{on, Exit, How, Prim, Schedule};

fn granted(op: usize, inv_ms: u64, ok_ms: u64, let_go_ms: u64) -> Record {
    Record {
        op,
        inv: inv_ms * 1_000_000,
        answered: ok_ms * 1_000_000,
        outcome: Outcome::Granted,
        let_go: Some(let_go_ms * 1_000_000),
        released: Some(Ok(())),
        release_lost: false,
        saw_loss: None,
    }
}

fn busy(op: usize, inv_ms: u64, answered_ms: u64) -> Record {
    Record {
        op,
        inv: inv_ms * 1_000_000,
        answered: answered_ms * 1_000_000,
        outcome: Outcome::Busy,
        ..Record::default()
    }
}

#[test]
fn a_busy_behind_a_holder_is_explained_and_one_behind_nobody_is_not() {
    let ops = vec![
        on(0, 0, 0).take(Prim::Lock(0)).hold(1000),
        on(1, 0, 100).take(Prim::Lock(0)).how(How::Acquire(800)),
    ];
    let holder = granted(0, 0, 5, 1005);
    let waiter = busy(1, 100, 900);
    let reasons = reasons_for(&ops, &[holder.clone(), waiter.clone()], &waiter, false, &[]);
    let gap = longest_gap(&ops[1], &reasons, waiter.inv + 50_000_000, 900_000_000);
    assert_eq!(gap.0, 0, "the holder was there all along");
    // The holder let go at 300 ms: 600 ms of nothing in the way.
    let holder = granted(0, 0, 5, 300);
    let reasons = reasons_for(&ops, &[holder, waiter.clone()], &waiter, false, &[]);
    let gap = longest_gap(&ops[1], &reasons, waiter.inv + 50_000_000, 900_000_000);
    assert_eq!(gap.0 / 1_000_000, 600);
}

#[test]
fn readers_share_but_a_waiting_writer_keeps_them_out_until_it_leaves() {
    let ops = vec![
        on(0, 0, 0).take(Prim::Read(0)).hold(2000),
        on(1, 0, 0).take(Prim::Write(0)).how(How::Acquire(200)),
        on(2, 0, 100).take(Prim::Read(0)).how(How::Acquire(2000)),
    ];
    let records = [granted(0, 0, 5, 2000), busy(1, 10, 210), busy(2, 100, 2100)];
    let reasons = reasons_for(&ops, &records, &records[2], false, &[]);
    // The other reader is no reason; the writer is, until it gave up (+50 ms).
    let gap = longest_gap(&ops[2], &reasons, 150_000_000, 2_100_000_000);
    assert_eq!(gap.1 / 1_000_000, 260);
    assert_eq!(gap.0 / 1_000_000, 2100 - 260);
}

/// A `try_acquire` does not overtake a task of its own process waiting for the key (the
/// local line); a task of another process is no reason. In memory every op is in one
/// process. (The memory run found this: a writer's `Try` `Busy` just after a release, with
/// another "process"'s writer waiting in the one shared locker.)
#[test]
fn a_try_behind_a_waiter_of_its_own_process_is_explained() {
    let ops = vec![
        on(0, 0, 0).take(Prim::Write(0)).how(How::Acquire(2000)),
        on(0, 1, 500).take(Prim::Write(0)).how(How::Try),
        on(1, 0, 500).take(Prim::Write(0)).how(How::Try),
    ];
    let records = [
        granted(0, 0, 900, 1000),
        busy(1, 500, 501),
        busy(2, 500, 501),
    ];
    let gap = |x: usize, one_process: bool| {
        let reasons = reasons_for(&ops, &records, &records[x], one_process, &[]);
        longest_gap(&ops[x], &reasons, records[x].inv, records[x].answered).0
    };
    assert_eq!(gap(1, false), 0, "its own process's waiter is in the way");
    assert_eq!(gap(2, false), 1_000_000, "another process's waiter is not");
    assert_eq!(gap(2, true), 0, "in one process, it is");
}

#[test]
fn permits_are_counted() {
    let ops = vec![
        on(0, 0, 0).take(Prim::Permits(0, 2)).hold(1000),
        on(1, 0, 0).take(Prim::Permits(0, 1)).hold(1000),
        on(2, 0, 100)
            .take(Prim::Permits(0, 1))
            .how(How::Acquire(800)),
        on(2, 1, 100)
            .take(Prim::Permits(0, 2))
            .how(How::Acquire(800)),
    ];
    let records = [
        granted(0, 0, 5, 1000),
        granted(1, 0, 5, 300),
        busy(2, 100, 900),
        busy(3, 150, 950),
    ];
    // One permit is free from 300 ms: enough for op 2, not for op 3.
    let r2 = reasons_for(&ops, &records, &records[2], false, &[]);
    assert_eq!(
        longest_gap(&ops[2], &r2, 150_000_000, 900_000_000).0 / 1_000_000,
        600
    );
    let r3 = reasons_for(&ops, &records, &records[3], false, &[]);
    assert_eq!(longest_gap(&ops[3], &r3, 150_000_000, 900_000_000).0, 0);
}

#[test]
fn a_schedule_prints_as_the_program_that_builds_it() {
    let schedule = Schedule::new(2)
        .op(on(1, 0, 300)
            .take(Prim::All(vec![0, 2]))
            .how(How::Try)
            .lease(500, false)
            .hold(400)
            .exit(Exit::Cancel(2)))
        .fault(700, Fault::Restart { from_data: true });
    let text = schedule.to_string();
    assert!(
        text.contains(".op(on(1, 0, 300).take(Prim::All([0, 2])).how(How::Try).lease(500, false).hold(400).exit(Exit::Cancel(2)))"),
        "{text}"
    );
    assert!(
        text.contains(".fault(700, Fault::Restart { from_data: true })"),
        "{text}"
    );
    let text = Schedule::new(2)
        .fault(
            200,
            Fault::Late {
                on: On::Semaphore(1),
                nth: 2,
                ms: 1500,
            },
        )
        .to_string();
    assert!(
        text.contains(".fault(200, Fault::Late { on: On::Semaphore(1), nth: 2, ms: 1500 })"),
        "{text}"
    );
}

fn held(start_ms: u64, end_ms: u64) -> Window {
    Window {
        unknown: true,
        ..Window::new(start_ms * 1_000_000, end_ms * 1_000_000, "late")
    }
}

fn failed(op: usize, inv_ms: u64, answered_ms: u64) -> Record {
    Record {
        op,
        inv: inv_ms * 1_000_000,
        answered: answered_ms * 1_000_000,
        outcome: Outcome::Failed("lock_unavailable".to_owned()),
        ..Record::default()
    }
}

/// A call the held connection may have carried counts as holding what it asked for from
/// its invocation until SETTLE after the connection was let go, whatever its caller was
/// told; the connection excuses everyone until then. From then on, a wait with nothing
/// in its way is blamed: a late call that left the lock to nobody for its lease.
#[test]
fn a_held_call_keeps_others_out_until_it_settles_and_not_after() {
    let ops = vec![
        on(0, 0, 0)
            .take(Prim::Lock(0))
            .how(How::Try)
            .lease(5000, true),
        on(1, 0, 100)
            .take(Prim::Lock(0))
            .how(How::Acquire(6000))
            .lease(5000, true),
    ];
    // The try timed out at 500 ms; its connection was held from 0 to 1500 ms.
    let records = [failed(0, 0, 500), busy(1, 100, 6100)];
    let windows = [held(0, 1500)];
    assert!(hit_by(&records[0], &windows[0]));
    let reasons = reasons_for(&ops, &records, &records[1], false, &windows);
    let gap = longest_gap(&ops[1], &reasons, 150_000_000, 6_100_000_000);
    let settled = 1500 + SETTLE.as_millis() as u64;
    assert_eq!(gap.1 / 1_000_000, settled, "excused until settled");
    assert_eq!(gap.0 / 1_000_000, 6100 - settled, "blamed from then on");
    // A call that ended before the connection was caught is no such call.
    assert!(!hit_by(&failed(0, 0, 500), &held(600, 1500)));
}

/// A held connection takes no lease that outlives it: the leases the unknown-outcome
/// schedules use (5 s and 8 s, bounded by the 4 s sessions of ZooKeeper and etcd) outlive
/// the longest hold (1.5 s); the general mix's 1.5 s lease does not.
#[test]
fn long_leases_outlive_a_held_connection_and_short_ones_may_not() {
    let longest = held(0, 1520);
    assert!(outlives_hold(5000, &longest));
    assert!(outlives_hold(8000, &longest));
    assert!(!outlives_hold(1500, &longest));
    assert!(!outlives_hold(3000, &longest));
    assert!(outlives_hold(3000, &held(0, 800)));
}
