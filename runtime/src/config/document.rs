//! A [`LockConfig`] read from a document: TOML text or file, or any serde format, as written
//! (strings for durations), then checked field by field.

use std::path::Path;

use serde::Deserialize;

use super::checks::{
    check_bound, check_lease, check_prefix, check_url, invalid, parse_drift, parse_duration, urls,
};
use super::{LockConfig, SentinelConfig};
use crate::error::LockError;
use crate::primitives::guard::OnLost;
use crate::web::RouteRule;

impl LockConfig {
    /// Parses a TOML document.
    ///
    /// # Errors
    /// [`LockError::Config`] naming the field and the bad value: a syntax error (with line and
    /// column), an unknown field, a value of the wrong type, a duration that does not parse,
    /// a lease under 10 ms, a bad prefix, or a rule whose path or key does not parse.
    pub fn from_toml_str(text: &str) -> Result<LockConfig, LockError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| LockError::Config {
            message: format!("invalid leasehold config: {}", e.to_string().trim_end()),
            source: Some(Box::new(e)),
        })?;
        LockConfig::try_from(raw).map_err(invalid)
    }

    /// Reads and parses a TOML file.
    ///
    /// # Errors
    /// [`LockError::Config`] when the file cannot be read (naming the path), or as
    /// [`from_toml_str`](Self::from_toml_str).
    pub fn from_toml_file(path: impl AsRef<Path>) -> Result<LockConfig, LockError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| LockError::Config {
            message: format!(
                "cannot read the leasehold config file {}: {e}",
                path.display()
            ),
            source: Some(Box::new(e)),
        })?;
        LockConfig::from_toml_str(&text).map_err(|e| match e {
            LockError::Config { message, source } => LockError::Config {
                message: format!("{}: {message}", path.display()),
                source,
            },
            other => other,
        })
    }
}

/// The document as written: strings for durations, checked in [`TryFrom`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    url: Option<String>,
    #[serde(default)]
    redlock: Vec<String>,
    #[serde(default)]
    cluster: Vec<String>,
    sentinel: Option<SentinelConfig>,
    zookeeper: Option<String>,
    #[serde(default)]
    etcd: Vec<String>,
    postgres: Option<String>,
    session_timeout: Option<String>,
    clock_drift: Option<f64>,
    prefix: Option<String>,
    lease: Option<String>,
    wait: Option<String>,
    op_timeout: Option<String>,
    connect_timeout: Option<String>,
    watchdog: Option<bool>,
    lazy_connect: Option<bool>,
    retry_unavailable: Option<bool>,
    status_codes: Option<crate::web::StatusCodes>,
    #[serde(default)]
    rules: Vec<RawRule>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    method: Option<String>,
    path: String,
    key: String,
    lease: Option<String>,
    wait: Option<String>,
    watchdog: Option<bool>,
    on_lost: Option<String>,
    #[serde(default)]
    fair: bool,
}

impl TryFrom<RawConfig> for LockConfig {
    type Error = LockError;

    fn try_from(raw: RawConfig) -> Result<Self, LockError> {
        let opt = |field: &str, value: &Option<String>| {
            value
                .as_deref()
                .map(|v| parse_duration(field, v))
                .transpose()
        };
        let lease = opt("lease", &raw.lease)?;
        if let (Some(lease), Some(text)) = (lease, &raw.lease) {
            check_lease("lease", text, lease)?;
        }
        let mut bounds = [None, None];
        for (slot, (field, value)) in bounds.iter_mut().zip([
            ("op_timeout", &raw.op_timeout),
            ("connect_timeout", &raw.connect_timeout),
        ]) {
            if let Some(text) = value {
                *slot = Some(check_bound(field, text, parse_duration(field, text)?)?);
            }
        }
        let rules = raw
            .rules
            .into_iter()
            .enumerate()
            .map(|(i, rule)| rule.into_rule(i))
            .collect::<Result<_, _>>()?;
        if let Some(drift) = raw.clock_drift {
            parse_drift("clock_drift", &drift.to_string())?;
        }
        Ok(LockConfig {
            url: raw.url.map(|u| check_url("url", &u)).transpose()?,
            redlock: urls("redlock", raw.redlock)?,
            cluster: urls("cluster", raw.cluster)?,
            sentinel: raw
                .sentinel
                .map(|s| {
                    Ok::<_, LockError>(SentinelConfig {
                        urls: urls("sentinel.urls", s.urls)?,
                        ..s
                    })
                })
                .transpose()?,
            zookeeper: raw.zookeeper,
            etcd: raw.etcd,
            postgres: raw.postgres,
            session_timeout: opt("session_timeout", &raw.session_timeout)?,
            clock_drift: raw.clock_drift,
            prefix: raw.prefix.map(|p| check_prefix("prefix", &p)).transpose()?,
            lease,
            wait: opt("wait", &raw.wait)?,
            op_timeout: bounds[0],
            connect_timeout: bounds[1],
            watchdog: raw.watchdog,
            lazy_connect: raw.lazy_connect,
            retry_unavailable: raw.retry_unavailable,
            status_codes: raw.status_codes,
            rules,
        })
    }
}

impl RawRule {
    fn into_rule(self, index: usize) -> Result<RouteRule, LockError> {
        let at = |field: &str| format!("rules[{index}].{field}");
        let method = self.method.as_deref().unwrap_or("*");
        let mut rule = RouteRule::new(method, &self.path, &self.key).map_err(|e| {
            // Say which of the three strings was refused.
            let message = e.to_string();
            let field = if message.starts_with("method") {
                "method"
            } else if message.starts_with("path") {
                "path"
            } else {
                "key"
            };
            LockError::config(format!("{}: {message}", at(field)))
        })?;
        if let Some(text) = &self.lease {
            let lease = parse_duration(&at("lease"), text)?;
            rule = rule.lease(check_lease(&at("lease"), text, lease)?);
        }
        if let Some(text) = &self.wait {
            rule = rule.wait(parse_duration(&at("wait"), text)?);
        }
        if let Some(on) = self.watchdog {
            rule = rule.watchdog(on);
        }
        rule = rule.fair(self.fair);
        if let Some(text) = &self.on_lost {
            rule = rule.on_lost(match text.as_str() {
                "cancel" => OnLost::Cancel,
                "continue" => OnLost::Continue,
                _ => {
                    return Err(LockError::config(format!(
                        "{}: {text:?} is not an option; write \"cancel\" (stop the request, 503) \
                         or \"continue\" (let it finish)",
                        at("on_lost")
                    )))
                }
            });
        }
        Ok(rule)
    }
}
