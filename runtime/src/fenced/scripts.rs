//! The Lua of the fenced helpers: the exact token comparison, and the three scripts built on
//! it, public for applications that run their scripts themselves.

use std::sync::LazyLock;

/// The hash field that keeps the newest fencing token that claimed or wrote a record. A
/// fenced write refuses to set it as one of its fields.
///
/// ```
/// assert_eq!(leasehold::fenced::FENCE_FIELD, "fence");
/// ```
pub const FENCE_FIELD: &str = "fence";

/// Lua source that defines two local functions for scripts that compare fencing tokens:
/// `leasehold_is_fence(s)`, true when `s` is a canonical decimal (`"0"`, or digits without a
/// leading zero), and `leasehold_fence_cmp(a, b)`, -1, 0 or 1 as token `a` is older than, the
/// same as, or newer than token `b`. It compares the decimal strings, so it is exact for every
/// `u64`, where `tonumber` is not above 2^53. Put it in front of your own script, for a read
/// and a write in one step (which, like a claim, leaves no window between them):
///
/// ```no_run
/// # async fn run(conn: &mut redis::aio::MultiplexedConnection) -> redis::RedisResult<()> {
/// use std::sync::LazyLock;
///
/// // Sells one item for a holder whose fence is not older than the record's: the read of
/// // `left` and the write happen in one script, so no other write comes between them.
/// static SELL: LazyLock<redis::Script> = LazyLock::new(|| {
///     redis::Script::new(&format!(
///         "{}{}",
///         leasehold::fenced::FENCE_CMP_LUA,
///         r#"
///         local seen = redis.call('HGET', KEYS[1], 'fence')
///         if seen and leasehold_fence_cmp(ARGV[1], seen) < 0 then return -1 end
///         redis.call('HSET', KEYS[1], 'fence', ARGV[1])
///         local left = tonumber(redis.call('HGET', KEYS[1], 'left') or '0')
///         if left <= 0 then return 0 end
///         redis.call('HSET', KEYS[1], 'left', left - 1)
///         return 1
///         "#
///     ))
/// });
/// let fence: u64 = 9_007_199_254_740_993;
/// let sold: i64 = SELL.key("stock:42").arg(fence).invoke_async(conn).await?;
/// # Ok(()) }
/// ```
pub const FENCE_CMP_LUA: &str = include_str!("lua/fence_cmp.lua");

/// The Lua script of [`claim_with_fence`](super::claim_with_fence) (and so of
/// [`claim`](super::claim)), for applications that run their scripts themselves (another
/// client library, a script manager, `redis-cli`). It starts with [`FENCE_CMP_LUA`].
///
/// - `KEYS[1]`: the hash.
/// - `ARGV[1]`: the holder's fencing token, a canonical decimal.
///
/// Raises the hash's `fence` field to the token unless it holds a newer one, and returns
/// `{1, field, value, ...}` (every field of the hash after the claim, `fence` included) when
/// claimed, `{0, newest}` when refused (`newest`: the newer token, a string). Fails, changing
/// nothing, when the token is not a canonical decimal or the hash's `fence` field holds
/// something else than a token.
///
/// ```
/// let script = redis::Script::new(leasehold::fenced::CLAIM_LUA);
/// assert_eq!(script.get_hash().len(), 40); // EVALSHA it like any other script
/// ```
pub const CLAIM_LUA: &str = concat!(
    include_str!("lua/fence_cmp.lua"),
    include_str!("lua/claim.lua")
);

/// The Lua script of [`write_if_claimed`](super::write_if_claimed) (and so of
/// [`Claim::write`](super::Claim::write)). It starts with [`FENCE_CMP_LUA`].
///
/// - `KEYS[1]`: the hash.
/// - `ARGV[1]`: the writer's fencing token, a canonical decimal.
/// - `ARGV[2]`, `ARGV[3]`, ...: field, value, field, value, ... (none to check the claim only).
///
/// Sets the fields only while the hash's `fence` field holds exactly the writer's token (its
/// claim). Returns `{1, token}` when written, `{0, stored}` when refused (`stored`: the token in
/// the hash, a string, `""` when it has none). Fails, writing nothing, when the token is not a
/// canonical decimal or the fields do not come in pairs or name [`FENCE_FIELD`].
///
/// ```
/// let script = redis::Script::new(leasehold::fenced::WRITE_IF_CLAIMED_LUA);
/// assert_eq!(script.get_hash().len(), 40);
/// ```
pub const WRITE_IF_CLAIMED_LUA: &str = concat!(
    include_str!("lua/fence_cmp.lua"),
    include_str!("lua/write_if_claimed.lua")
);

/// The Lua script of [`write_all_if_claimed`](super::write_all_if_claimed) (and so of
/// [`write_all`](super::write_all)). It starts with [`FENCE_CMP_LUA`].
///
/// - `KEYS[1..n]`: the hashes (of one slot, on a Redis Cluster).
/// - `ARGV`: for each hash in `KEYS`' order: the writer's token for it, the number of fields
///   to set, then field, value, field, value, ...
///
/// Sets every field only while every hash's `fence` field holds exactly its writer's token.
/// Returns `{1}` when written, `{0, i, stored}` when the `i`-th hash (from 1) did not (`stored`:
/// its token, `""` when none): nothing was written. Fails, writing nothing, on a token that is
/// not a canonical decimal, arguments that do not add up, or a field named [`FENCE_FIELD`].
///
/// ```
/// let script = redis::Script::new(leasehold::fenced::WRITE_ALL_IF_CLAIMED_LUA);
/// assert_eq!(script.get_hash().len(), 40);
/// ```
pub const WRITE_ALL_IF_CLAIMED_LUA: &str = concat!(
    include_str!("lua/fence_cmp.lua"),
    include_str!("lua/write_all_if_claimed.lua")
);

/// The Lua script of [`write_if_newer`](super::write_if_newer), the blind fenced write. It
/// starts with [`FENCE_CMP_LUA`].
///
/// - `KEYS[1]`: the hash.
/// - `ARGV[1]`: the writer's fencing token, a canonical decimal.
/// - `ARGV[2]`, `ARGV[3]`, ...: field, value, field, value, ... (none to record the token
///   only).
///
/// Returns `{1, token}` when written, and `{0, newest}` when refused, with `newest` the newer
/// token stored in the hash, as a string. Fails, writing nothing, when the token is not a
/// canonical decimal, the fields do not come in pairs or name [`FENCE_FIELD`], or the hash's
/// `fence` field holds something else than a token.
///
/// ```
/// let script = redis::Script::new(leasehold::fenced::WRITE_IF_NEWER_LUA);
/// assert_eq!(script.get_hash().len(), 40); // EVALSHA it like any other script
/// ```
pub const WRITE_IF_NEWER_LUA: &str = concat!(
    include_str!("lua/fence_cmp.lua"),
    include_str!("lua/write_if_newer.lua")
);

pub(super) static CLAIM: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(CLAIM_LUA));

pub(super) static WRITE_IF_CLAIMED: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(WRITE_IF_CLAIMED_LUA));

pub(super) static WRITE_ALL_IF_CLAIMED: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(WRITE_ALL_IF_CLAIMED_LUA));

pub(super) static WRITE_IF_NEWER: LazyLock<redis::Script> =
    LazyLock::new(|| redis::Script::new(WRITE_IF_NEWER_LUA));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_never_turn_tokens_into_lua_numbers() {
        // tonumber rounds tokens above 2^53; the integration tests show the failure itself.
        // Only counts of fields may be numbers, and those lines name no token.
        for script in [
            CLAIM_LUA,
            WRITE_IF_CLAIMED_LUA,
            WRITE_ALL_IF_CLAIMED_LUA,
            WRITE_IF_NEWER_LUA,
        ] {
            let code = script
                .lines()
                .filter(|line| !line.trim_start().starts_with("--"));
            for line in code {
                let counts = line.contains("local count = tonumber(");
                assert!(!line.contains("tonumber") || counts, "{line}");
                assert!(!counts || !line.contains("fence"), "{line}");
            }
            assert!(script.starts_with(FENCE_CMP_LUA));
            assert!(script.contains(&format!("'{FENCE_FIELD}'")));
        }
    }
}
