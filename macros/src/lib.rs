//! The `#[distributed_lock]` attribute of [`leasehold`](https://docs.rs/leasehold).
//!
//! Depend on `leasehold` and write `leasehold::distributed_lock`; this crate is its
//! implementation detail and its expansion only makes sense with `leasehold` beside it.

use proc_macro::TokenStream;

mod args;
mod bindings;
mod build;
mod expand;
mod template;

/// Runs an `async fn` only while this process holds a distributed lock on a key built from
/// its arguments.
///
/// ```
/// use leasehold::{distributed_lock, LockError, Locker};
///
/// #[distributed_lock(key = "order:<id>", lease = "30s", wait = "3s")]
/// async fn place_order(id: u64) -> Result<u64, LockError> {
///     // runs only while this process holds `order:<id>`; the lease is renewed in the
///     // background while the body runs, and the lock is released when it ends
///     Ok(id)
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), LockError> {
/// leasehold::set_global_default(Locker::in_memory())?; // or a Locker on your engine
/// assert_eq!(place_order(42).await?, 42);
/// # Ok(()) }
/// ```
///
/// Before the body runs, the key is built from the (borrowed) arguments and the lock is
/// taken; the body then runs with its arguments exactly as before; when it ends (by value,
/// `return`, `?`, panic, or because its future was dropped) the lock is released. The
/// function's signature is not touched, so `self`, generics, lifetimes, `impl Trait` and
/// other attributes (`#[post(...)]`, `#[tracing::instrument]`) work as usual.
///
/// # What the function must look like
/// - It is an `async fn`.
/// - It returns `Result<T, E>` (or an alias whose name ends in `Result`, like
///   `io::Result<T>`), where `E: From<leasehold::LockError>`: `LockError` itself, or your
///   error type with a `From` impl. That is how lock failures come out:
///
/// | the lock | the function returns | the body |
/// | --- | --- | --- |
/// | was busy for the whole `wait` | `Err(LockError::Busy { .. }.into())` | does not run |
/// | could not be reached (the engine down, a timeout) | `Err(LockError::Unavailable { .. }.into())` | does not run |
/// | lease lost while the body ran, `on_lost = "cancel"` | `Err(LockError::Lost { .. }.into())` | is dropped at its next `.await` |
/// | no `locker = ...` and no default installed | `Err(LockError::Config { .. }.into())`, saying how to fix it | does not run |
/// | was taken, `on_busy = "skip"` | `Ok(())` or `Ok(None)`, at once | does not run |
///
/// A nested call that locks the same key from within the body (same task) re-enters the lock
/// instead of waiting for itself.
///
/// # Options
///
/// | option | value | default |
/// | --- | --- | --- |
/// | `key` | template string; this or `keys` | — |
/// | `keys` | list of template strings: lock them all at once | — |
/// | `mode` | `"read"` (shared with other readers) or `"write"` | `"write"` (exclusive) |
/// | `fair` | `true`: no handover inside the process, processes take turns (with `keys`, for each key; not with `mode = "read"` or `permits`) | `false` |
/// | `fencing` | `false`: no fencing token, the guard has no `fence()`; on Redis a free lock is one native `SET NX PX` | `true` |
/// | `permits` | whole number from 1 to 10000: one permit of a semaphore of that many, instead of a lock | a lock |
/// | `lease` | duration string, at least `"10ms"` | the locker's default lease (30 s) |
/// | `wait` | duration string, `"0s"` fails fast | the locker's default wait (3 s) |
/// | `watchdog` | `true` or `false` | the locker's default (on) |
/// | `profile` | name of the locker's profile (`[profiles.NAME]` in its config), whose settings override `lease`, `wait`, `watchdog`, `fair` and `permits` | none |
/// | `locker` | expression giving a `Locker`, `&Locker` or `Arc<Locker>` | the global default (`leasehold::set_global_default`) |
/// | `guard` | identifier | no binding |
/// | `on_lost` | `"cancel"` or `"continue"` | `"cancel"` |
/// | `on_busy` | `"skip"` (return at once if taken) or `"wait"` | `"wait"` |
/// | `hold_at_least` | duration string: keep the lock that long after the body started | none |
/// | `hold_at_most` | duration string: the lease, never renewed (instead of `lease`, `watchdog`) | none |
/// | `crate` | path string | `"::leasehold"` |
///
/// Every option is checked at compile time: a typo'd option, a duration that does not parse,
/// a placeholder that names no argument, a non-`async` fn or a return type that is not a
/// `Result` is an error at the offending token, and all of them are reported at once.
///
/// ## `key`: the lock's name, from the arguments
/// Literal text with `<placeholders>`. A placeholder names any binding of the function,
/// including bindings inside argument patterns (`Path(id): Path<u64>`), and `self`, followed
/// by optional field or tuple-field accesses (`<order.customer_id>`, `<path.0>`,
/// `<self.tenant>`). Each is formatted with `Display`. Write `<<` and `>>` for literal `<`
/// and `>`; everything else (braces included) is taken literally.
///
/// ```
/// # use leasehold::{distributed_lock, LockError};
/// struct Path<T>(T);
/// struct Order { customer_id: u64, sku: (String, u32) }
///
/// #[distributed_lock(key = "stock:<id>")]
/// async fn by_pattern(Path(id): Path<u64>) -> Result<(), LockError> { Ok(()) }
///
/// #[distributed_lock(key = "customer:<order.customer_id>:<order.sku.0>")]
/// async fn by_field(order: Order) -> Result<(), LockError> { Ok(()) }
///
/// #[distributed_lock(key = "cmp:<<a>>:{<n>}")] // the key for n = 7 is `cmp:<a>:{7}`
/// async fn escaped(n: u32) -> Result<(), LockError> { Ok(()) }
/// ```
///
/// ## `keys`: several locks at once
/// `keys = ["wallet:<from>", "wallet:<to>"]` takes every key before the body runs, all or
/// nothing (see [`Locker::lock_all`](../leasehold/struct.Locker.html#method.lock_all)): keys
/// that come out equal are one lock (a transfer from a wallet to itself does not wait on
/// itself), they are taken in one global order whatever order they are written in (so two
/// transfers in opposite directions never deadlock), `wait` bounds the whole acquisition, and
/// losing any key's lease loses the whole lock. `guard = g` binds a `&MultiGuard`, with a
/// fence per key (`g.fence("wallet:1")`).
///
/// ```
/// # use leasehold::{distributed_lock, LockError, Locker};
/// #[distributed_lock(keys = ["wallet:<from>", "wallet:<to>"], guard = g)]
/// async fn transfer(from: u64, to: u64, amount: u64) -> Result<u64, LockError> {
///     assert_eq!(g.keys().count(), if from == to { 1 } else { 2 });
///     Ok(amount)
/// }
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), LockError> {
/// # leasehold::set_global_default(Locker::in_memory())?;
/// assert_eq!(transfer(1, 2, 10).await?, 10);
/// assert_eq!(transfer(2, 2, 5).await?, 5);
/// # Ok(()) }
/// ```
///
/// ## `mode`: read-write locks
/// `mode = "read"` takes the read side of a read-write lock on `key` (see
/// [`Locker::read_lock`](../leasehold/struct.Locker.html#method.read_lock)): any number of
/// readers hold it together, no writer while they do, and a waiting writer holds new readers
/// back. `mode = "write"` (the default) is the exclusive lock, which excludes readers too.
/// Readers have no fair mode: `fair = true` with `mode = "read"` is a compile error, and a
/// profile's `fair` is left out. A read inside a `mode = "write"` body of the same key is
/// a downgrade (see `Locker::read_lock`): it holds the lock on, with the write's
/// `hold_at_least` and its own.
///
/// ## `fencing`: locks without a fencing token
/// `fencing = false` takes the lock without a fencing token (see
/// [`LockRequest::unfenced`](../leasehold/struct.LockRequest.html#method.unfenced)), for a
/// body that never hands a token to what it protects: a cache rebuild, a job whose effects are
/// idempotent. It is the cheapest lock the store offers: on Redis a free lock is taken with
/// one native `SET NX PX`, no script. Renewal, waiting, re-entry, `on_lost`, `on_busy` and
/// `hold_at_least` work as usual. `guard = g` binds a `&UnfencedGuard`, which has no
/// `fence()`: there is no token to read, so none can be stored by mistake (`g.fence()` does
/// not compile). Inside the body the key re-enters unfenced; a fenced acquire of it there
/// fails with `LockError::Config`. Only with one `key`, not with `keys` (each key has its own
/// fence), `permits` (every permit holder gets a fence of its own, `PermitGuard::fence()`:
/// unfenced permits are not offered) or `mode = "read"` (a reader's fence places it
/// among the writers). A resource that must refuse the late writes of a holder that paused
/// past its lease needs the fenced lock, the default (`fencing = true`).
///
/// ```
/// # use leasehold::{distributed_lock, LockError, Locker};
/// #[distributed_lock(key = "cache:rebuild:<shard>", fencing = false, guard = g)]
/// async fn rebuild(shard: u32) -> Result<bool, LockError> {
///     // safe to run twice: no token to pass on, only whether the lock is still held
///     Ok(g.is_held())
/// }
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), LockError> {
/// # leasehold::set_global_default(Locker::in_memory())?;
/// assert!(rebuild(3).await?);
/// # Ok(()) }
/// ```
///
/// ## `permits`: a semaphore instead of a lock
/// `permits = N` holds one permit of the semaphore of `N` permits named by `key` (see
/// [`Locker::semaphore`](../leasehold/struct.Locker.html#method.semaphore)): up to `N` bodies
/// run at once across every process, each permit with a lease of its own, renewed while its
/// body runs. `guard = g` binds a `&PermitGuard`, whose `g.fence()` is the permit's fencing
/// token (every holder gets its own, as a lock's holder does). Only with one `key`, not with `keys`,
/// `mode`, `fair`, `fencing = false`, `on_busy` or `hold_at_*`.
///
/// ```
/// # use leasehold::{distributed_lock, LockError};
/// #[distributed_lock(key = "partner-api", permits = 3, wait = "2s")]
/// async fn call_partner() -> Result<(), LockError> {
///     // at most three of these run at once, fleet-wide
///     Ok(())
/// }
/// ```
///
/// ## `profile`: settings from configuration
/// `profile = "payments"` takes the lock with the locker's profile of that name (a
/// `[profiles.payments]` table of its config, or `LockerBuilder::profile`): what the profile
/// sets (`lease`, `wait`, `watchdog`, `fair`, and `limit` for `permits`) overrides the
/// attribute's literals, which stay the defaults for what it leaves unset. So the numbers can
/// change per deployment without a rebuild. A profile the locker lacks is found at start-up:
/// [`set_global_default`](../leasehold/fn.set_global_default.html) refuses a locker that an
/// attribute without `locker = ...` cannot use, and
/// [`Locker::check_call_sites`](../leasehold/struct.Locker.html#method.check_call_sites)
/// checks every attribute of the program (by function, file, line and key). A call that
/// still meets a configuration error logs it at `error`, once per attribute. The profiles
/// that plain requests name (`locker.leader("expiry").profile("expiry-worker")`) are checked
/// at start-up with
/// [`Locker::check_profiles`](../leasehold/struct.Locker.html#method.check_profiles).
///
/// ```standalone_crate
/// # // A program of its own: the global default locker checks every call site of the program.
/// # use leasehold::{distributed_lock, LockError, Locker, Profile};
/// #[distributed_lock(key = "payout:<id>", lease = "30s", profile = "payments")]
/// async fn payout(id: u64) -> Result<u64, LockError> {
///     Ok(id)
/// }
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), LockError> {
/// // [profiles.payments] lease = "45s", wait = "0s" in the config file, or:
/// let locker = Locker::builder()
///     .profile("payments", Profile::new().lease(std::time::Duration::from_secs(45)))
///     .build_in_memory()?;
/// leasehold::set_global_default(locker)?; // checks `payout` against the locker
/// assert_eq!(payout(7).await?, 7);
/// # Ok(()) }
/// ```
///
/// ## `lease` and `watchdog`: how long the lock lasts
/// `lease` is how long the engine keeps the lock if this process stops renewing it (say, it
/// crashed), written as a `humantime` duration: `"500ms"`, `"30s"`, `"2m"`, `"1h 30m"`. (On
/// ZooKeeper and etcd a crashed process's locks go when its session ends, and a lease is at
/// most the session timeout; see
/// [`LockRequest::lease`](../leasehold/struct.LockRequest.html#method.lease).)
/// With `watchdog = true` the lease is renewed every lease/3 while the body runs, so the
/// body may run longer than the lease; with `watchdog = false` the lease is a hard
/// maximum, and with `on_lost = "cancel"` a body still running when it ends is dropped.
///
/// ```
/// # use leasehold::{distributed_lock, LockError};
/// #[distributed_lock(key = "report", lease = "2m", watchdog = false)]
/// async fn nightly_report() -> Result<(), LockError> {
///     // at most two minutes, renewed by no one
///     Ok(())
/// }
/// ```
///
/// ## `wait`: how long to wait for a busy lock
/// A busy lock is waited for (woken by the holder's release, not by polling) up to `wait`,
/// then the function returns `LockError::Busy` without running the body. `"0s"` fails
/// at once.
///
/// ```
/// # use leasehold::{distributed_lock, LockError};
/// #[distributed_lock(key = "import:<file>", wait = "0s")]
/// async fn import(file: String) -> Result<(), LockError> {
///     // if another process is importing `file`, return `Busy` at once
///     Ok(())
/// }
/// ```
///
/// ## `locker`: which `Locker` to use
/// Any expression giving a `Locker`, a `&Locker` or an `Arc<Locker>`, evaluated before the
/// body runs and able to use the arguments (`state.locker`, `self.locker`, a function call).
/// Without it, the locker installed with `leasehold::set_global_default` is used.
///
/// ```
/// # use leasehold::{distributed_lock, LockError, Locker};
/// struct Shop { locker: Locker, name: String }
///
/// impl Shop {
///     #[distributed_lock(key = "shop:<self.name>:<sku>", locker = self.locker)]
///     async fn sell(&self, sku: u32) -> Result<u32, LockError> {
///         Ok(sku)
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), LockError> {
/// let shop = Shop { locker: Locker::in_memory(), name: "north".into() };
/// assert_eq!(shop.sell(3).await?, 3);
/// # Ok(()) }
/// ```
///
/// ## `guard`: the lock inside the body
/// Binds a `&LockGuard` under the given name, for its fencing token (`g.fence()`, strictly
/// increasing per key: pass it to storage that can reject stale writers), `g.key()`,
/// `g.is_held()` and `g.lost()`. With `keys` it is a `&MultiGuard`, with `permits` a
/// `&PermitGuard`, and with `fencing = false` a `&UnfencedGuard` (no `fence()`).
///
/// ```
/// # use leasehold::{distributed_lock, LockError, Locker};
/// #[distributed_lock(key = "account:<id>", guard = lock)]
/// async fn debit(id: u64, cents: u64) -> Result<u64, LockError> {
///     let fence = lock.fence();
///     // e.g. UPDATE accounts SET ... WHERE id = $id AND last_fence < $fence
///     Ok(fence)
/// }
/// ```
///
/// ## `on_lost`: when the lease is lost anyway
/// A lease can be lost while the body runs (the engine restarted or failed over, the process
/// paused past its lease, `watchdog = false`). With `"cancel"` (the default) the body's future is dropped at
/// its next `.await` and the function returns `LockError::Lost`; with `"continue"` the body
/// runs to its end (check `g.is_held()` or race `g.lost()` yourself).
///
/// ```
/// # use leasehold::{distributed_lock, LockError};
/// #[distributed_lock(key = "cache-warmup", on_lost = "continue", guard = lock)]
/// async fn warm_up() -> Result<bool, LockError> {
///     // harmless to finish twice: keep going, but say whether we still held the lock
///     Ok(lock.is_held())
/// }
/// ```
///
/// ## Singleton jobs: `on_busy`, `hold_at_least`, `hold_at_most`
/// A scheduled job that every instance of a service triggers (a cron line in each replica)
/// must run once per window across the fleet, even when the instances' clocks and schedulers
/// fire at slightly different moments.
///
/// ```
/// # use leasehold::{distributed_lock, LockError, Locker};
/// #[distributed_lock(key = "job:nightly-report", on_busy = "skip", hold_at_least = "30s", hold_at_most = "10m")]
/// async fn nightly_report() -> Result<Option<u64>, LockError> {
///     // runs on one instance; the others return `Ok(None)` at once
///     Ok(Some(42))
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), LockError> {
/// # leasehold::set_global_default(Locker::in_memory())?;
/// assert_eq!(nightly_report().await?, Some(42));
/// // Triggered again a moment later (here, or on another instance): skipped.
/// assert_eq!(nightly_report().await?, None);
/// # Ok(()) }
/// ```
///
/// - `on_busy = "skip"`: when another holder has the lock, the call returns at once without
///   running the body, and says so in its value. So the function returns `Result<(), E>` (a
///   skipped call returns `Ok(())`, and an event "skipped: the lock is held elsewhere" is
///   traced) or `Result<Option<T>, E>` (a skipped call returns `Ok(None)`); any other return
///   type is refused at compile time. A skip never waits, so `wait` cannot be given with it.
///   Errors (the store unreachable, no locker) are still errors. `on_busy = "wait"`, the
///   default, waits up to `wait` and then fails with `LockError::Busy`.
/// - `hold_at_least = "30s"`: the lock stays taken for at least that long after the body
///   started, even when the body ended sooner (by value, error, panic or cancellation), so an
///   instance triggered a moment after the job ended elsewhere finds it taken. A body that
///   runs longer releases the lock when it ends, as usual. Where locks expire by themselves
///   (Redis, RedLock, PostgreSQL, in memory) the lock is set to expire at the end of the hold
///   instead of being deleted, so the hold outlives a process that dies meanwhile; on
///   ZooKeeper and etcd the locker keeps the lock and releases it at the end of the hold, and
///   a process that dies meanwhile loses it when its session ends. See
///   [`LockRequest::hold_at_least`](../leasehold/struct.LockRequest.html#method.hold_at_least).
///   It may be longer than `lease` (the watchdog keeps the lock until the body ends, the
///   expiry after that), not longer than a lease that is not renewed. Only with one `key`.
/// - `hold_at_most = "10m"`: the lease without renewal, for jobs that must never run past a
///   bound: the same as `lease = "10m", watchdog = false`, so it cannot be given with `lease`
///   or `watchdog`. A body still running when it ends has lost the lock: with `on_lost =
///   "cancel"` (the default) it is dropped at its next `.await` and the call returns
///   `LockError::Lost`; with `on_lost = "continue"` it runs on, unprotected. A process that
///   dies holding it frees it at that bound.
///
/// ## `crate`: when `leasehold` is renamed
/// The expansion calls `::leasehold::...`; if the crate is reachable under another path (a
/// renamed dependency, a re-export from your own crate), name it here.
///
/// ```
/// use leasehold as locks;
///
/// #[locks::distributed_lock(key = "job:<id>", crate = "locks")]
/// async fn job(id: u32) -> Result<u32, locks::LockError> {
///     Ok(id)
/// }
/// ```
///
/// # Web handlers
/// Put it below or above the framework's route attribute. With axum, the handler's future
/// stays `Send` as long as the body's is.
///
/// ```ignore
/// // actix-web
/// #[post("/orders/{sku}")]
/// #[distributed_lock(key = "stock:<sku>", lease = "10s", wait = "2s", locker = shop.locker)]
/// async fn buy(sku: web::Path<String>, shop: web::Data<Shop>) -> Result<HttpResponse, ShopError> {
///     // ...
/// }
///
/// // axum
/// #[distributed_lock(key = "order:<id>", locker = state.locker)]
/// async fn buy(State(state): State<Arc<AppState>>, Path(id): Path<u64>) -> Result<Json<Order>, AppError> {
///     // ...
/// }
/// ```
#[proc_macro_attribute]
pub fn distributed_lock(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::expand(args.into(), item.into()).into()
}
