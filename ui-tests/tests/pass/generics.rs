//! Generic parameters, lifetimes, where clauses, `impl Trait` in argument and return
//! position: the signature is untouched, so they come for free.

#![deny(warnings)]

use std::fmt::Display;
use std::sync::Arc;

use leasehold::{distributed_lock, LockError, Locker};

#[distributed_lock(key = "item:<id>")]
async fn generic<T: Display + Send, E>(id: T) -> Result<T, E>
where
    E: From<LockError>,
{
    Ok(id)
}

#[distributed_lock(key = "borrow:<name>")]
async fn lifetimes<'a>(name: &'a str, tail: &str) -> Result<&'a str, LockError> {
    let _ = tail;
    Ok(name)
}

#[distributed_lock(key = "impl:<shown>")]
async fn impl_args(shown: impl Display, n: impl Into<u64> + Send) -> Result<u64, LockError> {
    Ok(n.into())
}

#[distributed_lock(key = "iter:<n>")]
async fn impl_return(n: u32) -> Result<impl Iterator<Item = u32>, LockError> {
    if n == 0 {
        return Ok(0..0);
    }
    Ok(0..n)
}

#[distributed_lock(key = "locker:<key>", locker = locker)]
async fn borrowed_locker(locker: &Locker, key: u8) -> Result<u8, LockError> {
    Ok(key)
}

#[distributed_lock(key = "arc:<key>", locker = locker)]
async fn arc_locker(locker: Arc<Locker>, key: u8) -> Result<u8, LockError> {
    Ok(key)
}

struct Wrapper<T>(T);

impl<T: Display + Sync> Wrapper<T> {
    #[distributed_lock(key = "wrapped:<self.0>")]
    async fn show(&self) -> Result<String, LockError> {
        Ok(self.0.to_string())
    }
}

fn assert_send<T: Send>(_: T) {}

pub(crate) fn main() {
    assert_send(generic::<_, LockError>(5));
    assert_send(lifetimes("a", "b"));
    assert_send(impl_args("x", 3u8));
    assert_send(impl_return(3));
    let w = Wrapper(1);
    assert_send(w.show());
}
