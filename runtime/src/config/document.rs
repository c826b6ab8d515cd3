//! A [`LockConfig`] read from a document: TOML text or file, or any serde format, as written
//! (strings for durations), then checked field by field.

use std::path::Path;

use std::time::Duration;

use std::collections::BTreeMap;

use serde::de::{MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::checks::{
    check_bound, check_fence_offset, check_lease, check_prefix, check_service, check_url, invalid,
    parse_drift, parse_duration, redact_text, urls,
};
use super::{LockConfig, SentinelConfig};
use crate::error::LockError;
use crate::primitives::guard::OnLost;
use crate::primitives::profile::Profile;
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
            // The message quotes the line of the error: hide any credentials in it.
            message: format!(
                "invalid leasehold config: {}",
                redact_text(e.to_string().trim_end())
            ),
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

/// The document as written, each value checked as it is read: an error then carries the
/// position of the bad value itself (TOML reports its line and column), also when the config
/// is a table nested in the application's own settings. What needs several fields is checked
/// in [`TryFrom`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    // URLs are checked after reading, not at the value: the format's message would quote the
    // value's line, and a URL may carry a password.
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
    mysql: Option<String>,
    #[serde(default, deserialize_with = "session_timeout")]
    session_timeout: Option<Duration>,
    #[serde(default, deserialize_with = "clock_drift")]
    clock_drift: Option<f64>,
    #[serde(default, deserialize_with = "fence_offset")]
    fence_offset: Option<u64>,
    #[serde(default, deserialize_with = "prefix")]
    prefix: Option<String>,
    #[serde(default, deserialize_with = "service")]
    service: Option<String>,
    #[serde(default, deserialize_with = "lease")]
    lease: Option<Duration>,
    #[serde(default, deserialize_with = "wait")]
    wait: Option<Duration>,
    #[serde(default, deserialize_with = "op_timeout")]
    op_timeout: Option<Duration>,
    #[serde(default, deserialize_with = "connect_timeout")]
    connect_timeout: Option<Duration>,
    watchdog: Option<bool>,
    lazy_connect: Option<bool>,
    retry_unavailable: Option<bool>,
    status_codes: Option<crate::web::StatusCodes>,
    #[serde(default, deserialize_with = "profiles")]
    profiles: BTreeMap<String, Profile>,
    #[serde(default, deserialize_with = "rules")]
    rules: Vec<RouteRule>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    method: Option<String>,
    path: String,
    key: String,
    #[serde(default, deserialize_with = "lease")]
    lease: Option<Duration>,
    #[serde(default, deserialize_with = "wait")]
    wait: Option<Duration>,
    watchdog: Option<bool>,
    #[serde(default, deserialize_with = "on_lost")]
    on_lost: Option<OnLost>,
    #[serde(default)]
    fair: bool,
    profile: Option<String>,
}

/// A field read as text and checked by `$check`, its error a serde error at the value.
macro_rules! checked {
    ($name:ident -> $ty:ty, |$text:ident| $check:expr) => {
        fn $name<'de, D: Deserializer<'de>>(d: D) -> Result<Option<$ty>, D::Error> {
            let text: Option<String> = Option::deserialize(d)?;
            text.map(|$text| -> Result<$ty, LockError> { $check })
                .transpose()
                .map_err(at_value)
        }
    };
}

checked!(prefix -> String, |text| check_prefix("prefix", &text));
checked!(service -> String, |text| check_service("service", &text));
checked!(lease -> Duration, |text| check_lease("lease", &text, parse_duration("lease", &text)?));
checked!(wait -> Duration, |text| parse_duration("wait", &text));
checked!(session_timeout -> Duration, |text| parse_duration("session_timeout", &text));
checked!(op_timeout -> Duration, |text| {
    check_bound("op_timeout", &text, parse_duration("op_timeout", &text)?)
});
checked!(connect_timeout -> Duration, |text| {
    check_bound("connect_timeout", &text, parse_duration("connect_timeout", &text)?)
});
checked!(on_lost -> OnLost, |text| match text.as_str() {
    "cancel" => Ok(OnLost::Cancel),
    "continue" => Ok(OnLost::Continue),
    _ => Err(LockError::config(format!(
        "on_lost: {text:?} is not an option; write \"cancel\" (stop the request, 503) or \
         \"continue\" (let it finish)"
    ))),
});

fn limit<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    let limit: Option<u32> = Option::deserialize(d)?;
    if let Some(limit) = limit {
        crate::kernel::options::check_permits(limit, 1).map_err(|e| {
            at_value(LockError::config(format!(
                "limit: {}",
                match e {
                    LockError::Config { message, .. } => message,
                    other => other.to_string(),
                }
            )))
        })?;
    }
    Ok(limit)
}

fn fence_offset<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let offset: Option<u64> = Option::deserialize(d)?;
    offset
        .map(|offset| check_fence_offset("fence_offset", offset))
        .transpose()
        .map_err(at_value)
}

fn clock_drift<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    let drift: Option<f64> = Option::deserialize(d)?;
    drift
        .map(|drift| parse_drift("clock_drift", &drift.to_string()))
        .transpose()
        .map_err(at_value)
}

/// The rules, each made a [`RouteRule`] as it is read, its errors naming its index.
fn rules<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<RouteRule>, D::Error> {
    struct Rules;
    impl<'de> Visitor<'de> for Rules {
        type Value = Vec<RouteRule>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a list of route rules")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut rules = Vec::new();
            while let Some(raw) = seq.next_element::<RawRule>()? {
                rules.push(raw.into_rule(rules.len()).map_err(at_value)?);
            }
            Ok(rules)
        }
    }
    d.deserialize_seq(Rules)
}

/// The `[profiles.NAME]` tables, each checked as it is read, its errors naming it.
fn profiles<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<String, Profile>, D::Error> {
    struct Profiles;
    impl<'de> Visitor<'de> for Profiles {
        type Value = BTreeMap<String, Profile>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(
                "a table of profiles, [profiles.NAME] with lease, wait, watchdog, fair, limit",
            )
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut profiles = BTreeMap::new();
            while let Some(name) = map.next_key::<String>()? {
                let profile = map.next_value_seed(OneProfile { name: &name })?;
                profile.check(&name).map_err(at_value)?;
                profiles.insert(name, profile);
            }
            Ok(profiles)
        }
    }
    d.deserialize_map(Profiles)
}

/// The settings a `[profiles.NAME]` table takes.
const PROFILE_SETTINGS: [&str; 5] = ["lease", "wait", "watchdog", "fair", "limit"];

/// The settings of the config's top level (the fields of [`RawConfig`]), which a profile's
/// table swallows when they are written after its header.
pub(super) const TOP_LEVEL_SETTINGS: [&str; 23] = [
    "url",
    "redlock",
    "cluster",
    "sentinel",
    "zookeeper",
    "etcd",
    "postgres",
    "mysql",
    "session_timeout",
    "clock_drift",
    "fence_offset",
    "prefix",
    "service",
    "lease",
    "wait",
    "op_timeout",
    "connect_timeout",
    "watchdog",
    "lazy_connect",
    "retry_unavailable",
    "status_codes",
    "profiles",
    "rules",
];

/// One `[profiles.NAME]` table, read setting by setting: an unknown key is reported with
/// the table's name, and a top-level setting written after the table's header (where TOML
/// puts it in the table) with the fix.
struct OneProfile<'n> {
    name: &'n str,
}

impl<'de> serde::de::DeserializeSeed<'de> for OneProfile<'_> {
    type Value = Profile;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Profile, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for OneProfile<'_> {
    type Value = Profile;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the table [profiles.{}] with lease, wait, watchdog, fair, limit",
            self.name
        )
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Profile, A::Error> {
        let mut profile = Profile::new();
        let mut seen: Vec<String> = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            if seen.contains(&key) {
                return Err(serde::de::Error::custom(format!(
                    "`{key}` is set twice in the table [profiles.{}]",
                    self.name
                )));
            }
            match key.as_str() {
                "lease" => profile.lease = map.next_value::<LeaseValue>()?.0,
                "wait" => profile.wait = map.next_value::<WaitValue>()?.0,
                "watchdog" => profile.watchdog = Some(map.next_value()?),
                "fair" => profile.fair = Some(map.next_value()?),
                "limit" => profile.limit = map.next_value::<LimitValue>()?.0,
                other => {
                    return Err(serde::de::Error::custom(not_a_profile_setting(
                        self.name, other,
                    )))
                }
            }
            seen.push(key);
        }
        Ok(profile)
    }
}

/// A profile's values, each checked as the top level's are.
#[derive(Deserialize)]
#[serde(transparent)]
struct LeaseValue(#[serde(deserialize_with = "lease")] Option<Duration>);
#[derive(Deserialize)]
#[serde(transparent)]
struct WaitValue(#[serde(deserialize_with = "wait")] Option<Duration>);
#[derive(Deserialize)]
#[serde(transparent)]
struct LimitValue(#[serde(deserialize_with = "limit")] Option<u32>);

/// What is wrong with the key `key` in the table of the profile `name`, and the fix.
fn not_a_profile_setting(name: &str, key: &str) -> String {
    let takes = PROFILE_SETTINGS.join(", ");
    if TOP_LEVEL_SETTINGS.contains(&key) {
        return format!(
            "`{key}` is in the table [profiles.{name}], which takes only {takes}; `{key}` is a \
             setting of the whole config: in TOML every key written after a table's header \
             belongs to that table, so move `{key} = ...` above the first [table] header \
             (before [profiles.{name}])"
        );
    }
    let close = crate::primitives::profile::close_matches(key, PROFILE_SETTINGS);
    format!(
        "unknown setting `{key}` in the table [profiles.{name}], which takes {takes}{}",
        match close.first() {
            Some(close) => format!("; did you mean `{close}`?"),
            None => String::new(),
        }
    )
}

/// A check's message as a serde error, which the format places at the value being read.
fn at_value<E: serde::de::Error>(e: LockError) -> E {
    match e {
        LockError::Config { message, .. } => E::custom(message),
        other => E::custom(other),
    }
}

impl TryFrom<RawConfig> for LockConfig {
    type Error = LockError;

    fn try_from(raw: RawConfig) -> Result<Self, LockError> {
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
            mysql: raw.mysql,
            session_timeout: raw.session_timeout,
            clock_drift: raw.clock_drift,
            fence_offset: raw.fence_offset,
            prefix: raw.prefix,
            service: raw.service,
            lease: raw.lease,
            wait: raw.wait,
            op_timeout: raw.op_timeout,
            connect_timeout: raw.connect_timeout,
            watchdog: raw.watchdog,
            lazy_connect: raw.lazy_connect,
            retry_unavailable: raw.retry_unavailable,
            status_codes: raw.status_codes,
            profiles: raw.profiles,
            rules: raw.rules,
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
        if let Some(lease) = self.lease {
            rule = rule.lease(lease);
        }
        if let Some(wait) = self.wait {
            rule = rule.wait(wait);
        }
        if let Some(on) = self.watchdog {
            rule = rule.watchdog(on);
        }
        if let Some(on_lost) = self.on_lost {
            rule = rule.on_lost(on_lost);
        }
        if let Some(profile) = self.profile {
            rule = rule.profile(profile);
        }
        Ok(rule.fair(self.fair))
    }
}
