//! The names the resource's records go by: a key's hash, a write's name.

/// The Redis hash of key `key`'s counter (and wallet).
pub fn resource_key(key: &str) -> String {
    format!("resource:{key}")
}

/// The name of the `n`-th write (from 0) of hold `hold`, as its record carries it:
/// `w:<hold>:<n>`. A test can hold one worker's writes in the network by this prefix
/// (`w:0.` for worker 0's).
pub fn write_id(hold: &str, n: usize) -> String {
    format!("w:{hold}:{n}")
}

/// `(hold, n)` of a write's name made by [`write_id`].
pub fn parse_write_id(id: &str) -> Option<(String, usize)> {
    let rest = id.strip_prefix("w:")?;
    let (hold, n) = rest.rsplit_once(':')?;
    Some((hold.to_owned(), n.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::resource::{Fencing, ResourceStore};

    #[test]
    fn urls_name_their_store_and_write_ids_round_trip() {
        assert_eq!(
            ResourceStore::of("redis://127.0.0.1:1"),
            Ok(ResourceStore::Redis)
        );
        assert_eq!(
            ResourceStore::of("postgres://postgres@127.0.0.1:1/postgres"),
            Ok(ResourceStore::Postgres)
        );
        assert!(ResourceStore::of("http://x").is_err());
        assert_eq!(
            parse_write_id(&write_id("12.0.3", 4)),
            Some(("12.0.3".to_owned(), 4))
        );
        assert_eq!(parse_write_id("value"), None);
        for fencing in [Fencing::Claim, Fencing::WriteOnly] {
            assert_eq!(fencing.to_string().parse(), Ok(fencing));
        }
    }
}
