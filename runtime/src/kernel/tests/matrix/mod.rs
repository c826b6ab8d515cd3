//! The options × primitives matrix (issue 46): every option of a request or of the attribute,
//! on every primitive, does what its documentation says there, or is refused with
//! [`LockError::Config`]; where neither the API (no such method) nor the attribute (a compile
//! error) offers it, the table says so and why. [`MATRIX`] says which, cell by cell; one test
//! per cell (`matrix::<option>::<primitive>`) checks it, on the scripted store (two lockers
//! on it stand for two processes) and Tokio's paused clock, so every instant is the test's.
//! What depends on the engine (how a hold outlives its release, how an unrenewed lease ends)
//! is checked on every engine by the conformance property `options`.
//!
//! The primitives: `lock`, `read` (`read_lock`), `write` (`write_lock`), `downgrade` (the
//! write taken with the option, a read taken inside it, the write released: what is left is
//! the read), `lock_all`, `permits` (`semaphore`) and `leader`. Each option goes through the
//! request API and through the attribute's runtime (what `#[distributed_lock]` expands to),
//! wherever each offers it.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::__private::{self, LeaseKind, OnLost, Spec};
use crate::store::scripted::ScriptedStore;
use crate::{
    Leadership, LockError, LockGuard, LockRequest, Locker, LockerBuilder, MultiGuard, PermitGuard,
    Profile, UnfencedGuard,
};

mod cells;
mod world;

use world::*;

const KEY: &str = "matrix";
const KEYS: [&str; 2] = ["matrix:1", "matrix:2"];
/// A `hold_at_least`.
const HOLD: Duration = Duration::from_secs(5);
/// An unrenewed lease (`watchdog(false)`, the profile `quick`).
const LEASE: Duration = Duration::from_secs(1);
/// A `hold_at_most`.
const BOUND: Duration = Duration::from_secs(10);
/// Less than any margin the assertions leave on either side of an instant.
const TICK: Duration = Duration::from_millis(5);
const LONG: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(non_camel_case_types)]
enum Opt {
    hold_at_least,
    hold_at_most,
    fair,
    unfenced,
    profile,
    on_lost,
    watchdog_off,
    wait_zero,
}

const OPTS: [Opt; 8] = [
    Opt::hold_at_least,
    Opt::hold_at_most,
    Opt::fair,
    Opt::unfenced,
    Opt::profile,
    Opt::on_lost,
    Opt::watchdog_off,
    Opt::wait_zero,
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(non_camel_case_types)]
enum Prim {
    lock,
    read,
    write,
    downgrade,
    lock_all,
    permits,
    leader,
}

const PRIMS: [Prim; 7] = [
    Prim::lock,
    Prim::read,
    Prim::write,
    Prim::downgrade,
    Prim::lock_all,
    Prim::permits,
    Prim::leader,
];

/// What one option does on one primitive.
#[derive(Debug)]
enum Cell {
    /// What its documentation says: the cell's check asserts it.
    Means,
    /// Refused at the acquire with [`LockError::Config`] (an attribute's call site also at
    /// start-up, by [`Locker::check_call_sites`]).
    Config,
    /// Not offered: no such method, and a compile error in the attribute (or no attribute).
    NotOffered(&'static str),
}

macro_rules! matrix {
    (@cell Means) => { Cell::Means };
    (@cell Config) => { Cell::Config };
    (@cell NotOffered $why:literal) => { Cell::NotOffered($why) };
    (@test $opt:ident $prim:ident NotOffered) => {};
    (@test $opt:ident $prim:ident $cell:ident) => {
        #[tokio::test(start_paused = true)]
        async fn $prim() {
            check(Opt::$opt, Prim::$prim).await;
        }
    };
    ($($opt:ident { $($prim:ident => $cell:ident $(($why:literal))?),+ $(,)? })+) => {
        /// Every cell of the matrix.
        const MATRIX: &[(Opt, Prim, Cell)] = &[
            $($((Opt::$opt, Prim::$prim, matrix!(@cell $cell $($why)?)),)+)+
        ];
        $(
            mod $opt {
                use super::*;
                $(matrix!(@test $opt $prim $cell);)+
            }
        )+
    };
}

matrix! {
    hold_at_least {
        lock => Means,
        read => Means,
        write => Means,
        // The write's hold, kept through the downgrade (issue 46, item 2).
        downgrade => Means,
        lock_all => NotOffered("no MultiLockRequest::hold_at_least; `keys` with `hold_at_least` is a compile error (ui fail/hold_at_least_with_keys)"),
        permits => NotOffered("no SemaphoreRequest::hold_at_least; `permits` with `hold_at_least` is a compile error (macros build.rs: a permit is given back when the body ends)"),
        leader => NotOffered("no LeaderRequest::hold_at_least, and no attribute for elections"),
    }
    hold_at_most {
        lock => Means,
        read => Means,
        write => Means,
        downgrade => Means,
        lock_all => Means,
        permits => NotOffered("an attribute option only, and `permits` with `hold_at_most` is a compile error (macros build.rs: write `lease`, `watchdog = false`)"),
        leader => NotOffered("an attribute option only, and no attribute for elections: an unrenewed leadership is watchdog_off::leader"),
    }
    fair {
        lock => Means,
        read => Config,
        write => Means,
        // The write's fairness; a fair read inside it is refused.
        downgrade => Means,
        lock_all => Means,
        permits => NotOffered("no SemaphoreRequest::fair; `permits` with `fair` is a compile error (macros build.rs); a profile's fair is left out (profile::permits)"),
        // Always fair, whatever a profile says.
        leader => Means,
    }
    unfenced {
        lock => Means,
        read => Config,
        write => Means,
        downgrade => Config,
        lock_all => NotOffered("no MultiLockRequest::unfenced; `keys` with `fencing = false` is a compile error (ui fail/fencing_with_keys)"),
        permits => NotOffered("no SemaphoreRequest::unfenced; `permits` with `fencing = false` is a compile error (ui fail/fencing_with_permits)"),
        leader => NotOffered("no LeaderRequest::unfenced: the term is the leadership's fence"),
    }
    profile {
        lock => Means,
        read => Means,
        write => Means,
        downgrade => Means,
        lock_all => Means,
        permits => Means,
        leader => Means,
    }
    on_lost {
        lock => Means,
        read => Means,
        write => Means,
        downgrade => Means,
        lock_all => Means,
        permits => Means,
        leader => NotOffered("an attribute option only, and no attribute for elections: run_while_leader always cancels the task when the leadership is lost (kernel::tests::leader)"),
    }
    watchdog_off {
        lock => Means,
        read => Means,
        write => Means,
        downgrade => Means,
        lock_all => Means,
        permits => Means,
        leader => Means,
    }
    wait_zero {
        lock => Means,
        read => Means,
        write => Means,
        downgrade => Means,
        lock_all => Means,
        permits => Means,
        leader => Means,
    }
}

#[test]
fn every_option_meets_every_primitive_once() {
    for opt in OPTS {
        for prim in PRIMS {
            let cells = MATRIX
                .iter()
                .filter(|(o, p, _)| (*o, *p) == (opt, prim))
                .count();
            assert_eq!(cells, 1, "{opt:?} × {prim:?} has {cells} cells");
        }
    }
    assert_eq!(MATRIX.len(), OPTS.len() * PRIMS.len());
    for (opt, prim, cell) in MATRIX {
        if let Cell::NotOffered(why) = cell {
            assert!(
                !why.is_empty(),
                "{opt:?} × {prim:?}: say why it is not offered"
            );
        }
    }
}

async fn check(opt: Opt, prim: Prim) {
    let (_, _, cell) = MATRIX
        .iter()
        .find(|(o, p, _)| (*o, *p) == (opt, prim))
        .expect("every test is a cell");
    match cell {
        Cell::Means => match opt {
            Opt::hold_at_least => cells::hold::hold_at_least(prim).await,
            Opt::hold_at_most => cells::hold::hold_at_most(prim).await,
            Opt::fair => cells::fair::fair(prim).await,
            Opt::unfenced => cells::unfenced::unfenced(prim).await,
            Opt::profile => cells::profile::profile(prim).await,
            Opt::on_lost => cells::lost::on_lost(prim).await,
            Opt::watchdog_off => cells::lost::watchdog_off(prim).await,
            Opt::wait_zero => cells::wait_zero::wait_zero(prim).await,
        },
        Cell::Config => cells::refused::refused(opt, prim).await,
        Cell::NotOffered(_) => unreachable!("no test for a cell that is not offered"),
    }
}
