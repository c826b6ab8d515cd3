//! A record as a claim read it: the hash's fields, as Redis returned them.

use redis::{FromRedisValue, RedisResult, Value};

use super::scripts::FENCE_FIELD;

/// The fields of a record as its claim found them, right after the claim: what the holder
/// reads instead of reading the record again (a read of its own, after the claim, would be as
/// safe, and cost a round trip). [`FENCE_FIELD`] is not among them: it is the claim.
///
/// ```
/// use leasehold::fenced::Record;
///
/// let record = Record::from_fields([("left", "5"), ("sku", "42")]);
/// assert_eq!(record.get::<i64>("left").unwrap(), Some(5));
/// assert_eq!(record.get::<i64>("sold").unwrap(), None);
/// assert!(!record.is_empty());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Record {
    fields: Vec<(String, Vec<u8>)>,
}

impl Record {
    /// A record of these fields (for tests of code that reads claims; [`FENCE_FIELD`] is
    /// left out).
    pub fn from_fields<F, V>(fields: impl IntoIterator<Item = (F, V)>) -> Self
    where
        F: Into<String>,
        V: AsRef<[u8]>,
    {
        Record {
            fields: fields
                .into_iter()
                .map(|(f, v)| (f.into(), v.as_ref().to_vec()))
                .filter(|(f, _)| f != FENCE_FIELD)
                .collect(),
        }
    }

    /// The value of `field` read as a `T` (any type the `redis` crate reads a reply as:
    /// numbers, strings, bytes), or `None` when the record has no such field.
    ///
    /// # Errors
    /// The `redis` crate's error when the value is not a `T` (`"abc"` as an `i64`).
    pub fn get<T: FromRedisValue>(&self, field: &str) -> RedisResult<Option<T>> {
        match self.raw(field) {
            Some(bytes) => Ok(Some(T::from_redis_value(Value::BulkString(
                bytes.to_vec(),
            ))?)),
            None => Ok(None),
        }
    }

    /// The bytes of `field`, if the record has it.
    pub fn raw(&self, field: &str) -> Option<&[u8]> {
        self.fields
            .iter()
            .find(|(f, _)| f == field)
            .map(|(_, v)| v.as_slice())
    }

    /// Every field and its bytes, in the order Redis returned them.
    pub fn fields(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.fields.iter().map(|(f, v)| (f.as_str(), v.as_slice()))
    }

    /// Whether the record has no field but its claim: it did not exist before it was claimed
    /// (or held only a fence).
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// The fields of a `HGETALL`-shaped reply (`field, value, ...`), the claim left out.
    pub(super) fn from_reply(items: &[Value]) -> RedisResult<Self> {
        let mut fields = Vec::with_capacity(items.len() / 2);
        for pair in items.chunks(2) {
            let [field, value] = pair else {
                return Err(unexpected("a record's fields did not come in pairs"));
            };
            let field: String = String::from_redis_value_ref(field)?;
            let value: Vec<u8> = Vec::<u8>::from_redis_value_ref(value)?;
            if field != FENCE_FIELD {
                fields.push((field, value));
            }
        }
        Ok(Record { fields })
    }
}

pub(super) fn unexpected(what: &'static str) -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::UnexpectedReturnType, what))
}
