//! The weighted queue of a semaphore, as a pure rule over a listing of its contenders: who
//! holds permits, and whether a request fits.
//!
//! Each contender asks for `count` of `limit` permits; it holds when the permits of every
//! contender ahead of it (by creation order) and its own fit in the limit. A contender created
//! later never changes the sum ahead of an earlier one, and deletions only lower it: so one
//! that held once holds until it goes, the holders are a prefix of the queue, and their permits
//! never exceed the limit. The order is first come, first served: a request for several
//! permits that waits keeps its place, and the single permits that come free are kept for it.

use super::{Queued, Role};

/// Where a permits contender stands in its semaphore's queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Standing {
    /// Its permits and those of every contender ahead fit in the limit.
    Holds,
    /// They do not (yet).
    Behind,
    /// A contender ahead asked for another limit: the callers disagree.
    Disagrees { agreed: u32 },
    /// It is not in the queue.
    Gone,
}

/// The permits of one contender of a semaphore's queue, with the limit it asked for; `None`
/// for a contender of another kind (never found in a semaphore's queue).
fn permits(q: &Queued) -> Option<(u32, u32)> {
    match q.role {
        Role::Permits { limit, count } => Some((limit, count)),
        _ => None,
    }
}

/// Where the contender `mine` stands in `queue` (in creation order), asking for `count` of
/// `limit` permits. A contender ahead with another limit makes it [`Standing::Disagrees`]; a
/// contender ahead that is not a permits one counts as holding the whole limit.
pub(crate) fn standing(queue: &[Queued], mine: &str, limit: u32, count: u32) -> Standing {
    let Some(at) = queue.iter().position(|q| q.name == mine) else {
        return Standing::Gone;
    };
    fits(&queue[..at], limit, count)
}

/// Whether `count` of `limit` permits fit behind every contender of `ahead`:
/// [`Standing::Holds`] or [`Standing::Behind`], or [`Standing::Disagrees`] when one of them
/// asked for another limit.
pub(crate) fn fits(ahead: &[Queued], limit: u32, count: u32) -> Standing {
    let mut sum = u64::from(count);
    for q in ahead {
        match permits(q) {
            Some((theirs, _)) if theirs != limit => return Standing::Disagrees { agreed: theirs },
            Some((_, n)) => sum += u64::from(n),
            None => sum += u64::from(limit),
        }
    }
    if sum <= u64::from(limit) {
        Standing::Holds
    } else {
        Standing::Behind
    }
}

/// The holders of a semaphore's queue: its longest prefix of contenders that agree with the
/// first one's limit and whose permits fit in it; with that limit (`None` for an empty queue).
pub(crate) fn holders(queue: &[Queued]) -> (Option<u32>, &[Queued]) {
    let Some((limit, _)) = queue.first().and_then(permits) else {
        return (None, &[]);
    };
    let mut sum = 0u64;
    let mut end = 0;
    for q in queue {
        match permits(q) {
            Some((theirs, n)) if theirs == limit && sum + u64::from(n) <= u64::from(limit) => {
                sum += u64::from(n);
                end += 1;
            }
            _ => break,
        }
    }
    (Some(limit), &queue[..end])
}
