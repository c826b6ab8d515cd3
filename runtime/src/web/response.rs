//! How a [`LockError`] is answered over HTTP, framework-neutral: [`StatusCodes`] picks the
//! status of each error, [`LockErrorResponse`] is the whole answer (status, `Retry-After`, body).

use std::borrow::Cow;
use std::time::Duration;

use crate::error::LockError;

/// The whole HTTP answer to a [`LockError`], before any web framework sees it: actix-web and
/// axum responses (features `actix` and `axum`) are built from it, and
/// [`RouteLocks::on_error`](crate::RouteLocks::on_error) hooks reshape it.
///
/// By default ([`StatusCodes::default`]):
///
/// | error | status | `Retry-After` | body |
/// | --- | --- | --- | --- |
/// | `Busy` | 409 | the holder's remaining lease, whole seconds rounded up (1 if unknown) | `{"error":"lock_busy"}` |
/// | `Unavailable` | 503 | 1 | `{"error":"lock_unavailable"}` |
/// | `Lost` | 503 | — | `{"error":"lock_lost"}` |
/// | `InvalidKey` | 400 | — | `{"error":"lock_invalid_key"}` |
/// | `Config` | 500 | — | `{"error":"lock_config"}` |
///
/// The body never contains the key, the message or any detail of the engine: keys may carry
/// user data, and messages name servers. (See the [module docs](crate::web) for why 409 and
/// `Retry-After`.)
///
/// ```
/// use leasehold::{LockError, LockErrorResponse};
/// use std::time::Duration;
///
/// let busy = LockError::Busy { retry_after: Some(Duration::from_millis(1200)) };
/// let response = LockErrorResponse::from(&busy);
/// assert_eq!(response.status, 409);
/// assert_eq!(response.retry_after, Some(2));
/// assert_eq!(response.content_type, "application/json");
/// assert_eq!(response.body, r#"{"error":"lock_busy"}"#);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockErrorResponse {
    /// The HTTP status code. A value that is not a status (outside 100..=999) is answered 500.
    pub status: u16,
    /// The `Retry-After` header in whole seconds, when the client should retry.
    pub retry_after: Option<u64>,
    /// The error code: [`LockError::code`].
    pub code: &'static str,
    /// The `Content-Type` header. Defaults to `application/json`.
    pub content_type: Cow<'static, str>,
    /// The body. Defaults to `{"error":"<code>"}`.
    pub body: String,
}

/// The `Retry-After` of an unavailable store: long enough for a reconnect, short enough
/// for a failover.
const UNAVAILABLE_RETRY_AFTER: u64 = 1;

impl From<&LockError> for LockErrorResponse {
    /// The answer with the default [`StatusCodes`].
    fn from(err: &LockError) -> Self {
        StatusCodes::default().response(err)
    }
}

impl LockErrorResponse {
    /// The default JSON body of `code`: `{"error":"<code>"}`.
    fn json_body(code: &str) -> String {
        // Codes are fixed ASCII identifiers: nothing to escape.
        format!(r#"{{"error":"{code}"}}"#)
    }
}

/// The HTTP status of each [`LockError`], for [`RouteLocks`](crate::RouteLocks)
/// ([`status_codes`](crate::RouteLocks::status_codes)) and for answers built by hand
/// ([`response`](Self::response)).
///
/// Defaults to `Busy` 409, `Unavailable` 503, `Lost` 503, `InvalidKey` 400, `Config` 500 (see
/// the [module docs](crate::web) for why). A shop whose handlers answer 409 for "sold out" can
/// tell a busy lock apart by giving it another status, e.g. 423 or 503; `Retry-After` is sent
/// whatever the status.
///
/// With the `serde` feature it deserializes from a table whose fields are all optional:
/// `{ busy = 423, unavailable = 503, lost = 503, invalid_key = 400, config = 500 }`.
///
/// ```
/// use leasehold::{LockError, StatusCodes};
///
/// let codes = StatusCodes::default().busy(423);
/// let busy = LockError::Busy { retry_after: None };
/// assert_eq!(codes.status_of(&busy), 423);
/// let response = codes.response(&busy);
/// assert_eq!((response.status, response.retry_after), (423, Some(1)));
/// assert_eq!(response.body, r#"{"error":"lock_busy"}"#);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize),
    serde(default, deny_unknown_fields)
)]
#[must_use]
pub struct StatusCodes {
    #[cfg_attr(feature = "serde", serde(deserialize_with = "error_status"))]
    busy: u16,
    #[cfg_attr(feature = "serde", serde(deserialize_with = "error_status"))]
    unavailable: u16,
    #[cfg_attr(feature = "serde", serde(deserialize_with = "error_status"))]
    lost: u16,
    #[cfg_attr(feature = "serde", serde(deserialize_with = "error_status"))]
    invalid_key: u16,
    #[cfg_attr(feature = "serde", serde(deserialize_with = "error_status"))]
    config: u16,
}

impl Default for StatusCodes {
    fn default() -> Self {
        StatusCodes {
            busy: 409,
            unavailable: 503,
            lost: 503,
            invalid_key: 400,
            config: 500,
        }
    }
}

impl StatusCodes {
    /// The status of [`LockError::Busy`]: another request holds the lock for the whole
    /// wait. Defaults to 409.
    ///
    /// # Panics
    /// If `status` is not an error status (400 to 599).
    pub fn busy(mut self, status: u16) -> Self {
        self.busy = checked(status);
        self
    }

    /// The status of [`LockError::Unavailable`]: the lock store did not answer. Defaults
    /// to 503.
    ///
    /// # Panics
    /// If `status` is not an error status (400 to 599).
    pub fn unavailable(mut self, status: u16) -> Self {
        self.unavailable = checked(status);
        self
    }

    /// The status of [`LockError::Lost`]: the lease was lost while the handler ran, which
    /// was cancelled. Defaults to 503.
    ///
    /// # Panics
    /// If `status` is not an error status (400 to 599).
    pub fn lost(mut self, status: u16) -> Self {
        self.lost = checked(status);
        self
    }

    /// The status of [`LockError::InvalidKey`]: the request lacks what its key is built
    /// from, or the key is unusable. Defaults to 400.
    ///
    /// # Panics
    /// If `status` is not an error status (400 to 599).
    pub fn invalid_key(mut self, status: u16) -> Self {
        self.invalid_key = checked(status);
        self
    }

    /// The status of [`LockError::Config`]: the server is misconfigured (no locker
    /// installed, a bad lease). Defaults to 500.
    ///
    /// # Panics
    /// If `status` is not an error status (400 to 599).
    pub fn config(mut self, status: u16) -> Self {
        self.config = checked(status);
        self
    }

    /// The status these codes give `err`.
    pub fn status_of(&self, err: &LockError) -> u16 {
        match err {
            LockError::Busy { .. } => self.busy,
            LockError::Unavailable { .. } | LockError::Closed => self.unavailable,
            LockError::Lost { .. } => self.lost,
            LockError::InvalidKey { .. } => self.invalid_key,
            LockError::Config { .. } => self.config,
        }
    }

    /// The answer to `err` with these codes: the status, `Retry-After` as in the table of
    /// [`LockErrorResponse`], and the JSON body `{"error":"<code>"}`.
    pub fn response(&self, err: &LockError) -> LockErrorResponse {
        let retry_after = match err {
            LockError::Busy { retry_after } => Some(whole_seconds_up(*retry_after)),
            LockError::Unavailable { .. } => Some(UNAVAILABLE_RETRY_AFTER),
            _ => None,
        };
        LockErrorResponse {
            status: self.status_of(err),
            retry_after,
            code: err.code(),
            content_type: Cow::Borrowed("application/json"),
            body: LockErrorResponse::json_body(err.code()),
        }
    }
}

fn checked(status: u16) -> u16 {
    assert!(
        (400..=599).contains(&status),
        "{status} is not an error status; a lock error is answered with a status from 400 to 599"
    );
    status
}

#[cfg(feature = "serde")]
fn error_status<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u16, D::Error> {
    let status = <u16 as serde::Deserialize>::deserialize(d)?;
    if (400..=599).contains(&status) {
        Ok(status)
    } else {
        Err(serde::de::Error::custom(format!(
            "{status} is not an error status; write a status from 400 to 599"
        )))
    }
}

/// Seconds rounded up, at least 1; 1 when unknown. `Retry-After` counts whole seconds, and a
/// client that comes back before the holder's lease can have ended finds the lock busy again.
fn whole_seconds_up(d: Option<Duration>) -> u64 {
    let Some(d) = d else { return 1 };
    let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    secs.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_retry_after_and_bodies() {
        let busy = |ms: Option<u64>| LockError::Busy {
            retry_after: ms.map(Duration::from_millis),
        };
        let r = LockErrorResponse::from(&busy(Some(1200)));
        assert_eq!(
            (r.status, r.retry_after, r.code),
            (409, Some(2), "lock_busy")
        );
        assert_eq!(
            LockErrorResponse::from(&busy(Some(3000))).retry_after,
            Some(3)
        );
        assert_eq!(LockErrorResponse::from(&busy(Some(1))).retry_after, Some(1));
        assert_eq!(LockErrorResponse::from(&busy(Some(0))).retry_after, Some(1));
        assert_eq!(LockErrorResponse::from(&busy(None)).retry_after, Some(1));
        let r = LockErrorResponse::from(&LockError::unavailable("redis at x:1 timed out", None));
        assert_eq!((r.status, r.retry_after), (503, Some(1)));
        assert_eq!(r.body, r#"{"error":"lock_unavailable"}"#);
        let r = LockErrorResponse::from(&LockError::Lost {
            reason: crate::LostReason::Expired,
        });
        assert_eq!((r.status, r.retry_after), (503, None));
        assert_eq!(r.body, r#"{"error":"lock_lost"}"#);
        let r = LockErrorResponse::from(&LockError::invalid_key("secret-key too long"));
        assert_eq!((r.status, r.body.contains("secret")), (400, false));
        let r = LockErrorResponse::from(&LockError::config("x"));
        assert_eq!((r.status, r.code), (500, "lock_config"));
        assert_eq!(r.content_type, "application/json");
    }

    #[test]
    fn each_status_is_configurable_and_retry_after_stays() {
        let codes = StatusCodes::default()
            .busy(423)
            .unavailable(502)
            .lost(500)
            .invalid_key(422)
            .config(501);
        let busy = LockError::Busy {
            retry_after: Some(Duration::from_millis(2500)),
        };
        let r = codes.response(&busy);
        assert_eq!(
            (r.status, r.retry_after, r.code),
            (423, Some(3), "lock_busy")
        );
        let unavailable = LockError::unavailable("down", None);
        assert_eq!(
            (
                codes.status_of(&unavailable),
                codes.response(&unavailable).retry_after
            ),
            (502, Some(1))
        );
        let lost = LockError::Lost {
            reason: crate::LostReason::Refused,
        };
        assert_eq!(codes.status_of(&lost), 500);
        assert_eq!(codes.status_of(&LockError::invalid_key("k")), 422);
        assert_eq!(codes.status_of(&LockError::config("c")), 501);
        assert_eq!(StatusCodes::default().status_of(&busy), 409);
    }

    #[test]
    #[should_panic(expected = "200 is not an error status")]
    fn a_status_that_is_not_an_error_is_refused() {
        let _ = StatusCodes::default().busy(200);
    }

    #[cfg(feature = "serde")]
    #[test]
    fn status_codes_deserialize_with_defaults_and_checks() {
        let codes: StatusCodes = toml::from_str("busy = 423").unwrap();
        assert_eq!(codes, StatusCodes::default().busy(423));
        let err = toml::from_str::<StatusCodes>("lost = 204").unwrap_err();
        assert!(
            err.to_string().contains("204 is not an error status"),
            "{err}"
        );
        let err = toml::from_str::<StatusCodes>("bussy = 423").unwrap_err();
        assert!(err.to_string().contains("bussy"), "{err}");
    }
}
