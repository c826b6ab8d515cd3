//! The endpoints of an etcd deployment, taken apart: URLs the client is given, and the
//! credentials they carried, never shown in messages.

use crate::store::settings::percent_decode;

/// The endpoints of a deployment, taken apart: URLs without credentials, and the credentials.
pub(crate) struct Endpoints {
    /// `http://host:port` or `https://host:port`, as the client is given them.
    pub(crate) urls: Vec<String>,
    /// The user and password, from the URLs' `user:password@`.
    pub(super) user: Option<(String, String)>,
    pub(super) tls: bool,
}

impl Endpoints {
    /// Takes `[http[s]://][user:password@]host:port` endpoints apart. The messages never show
    /// a password.
    pub(crate) fn parse(endpoints: &[String]) -> Result<Endpoints, String> {
        if endpoints.is_empty() {
            return Err("etcd needs at least one endpoint, e.g. http://127.0.0.1:2379".into());
        }
        let mut urls = Vec::with_capacity(endpoints.len());
        let mut user: Option<(String, String)> = None;
        let mut schemes = Vec::new();
        for endpoint in endpoints {
            let shown = crate::store::settings::redact(endpoint);
            let (scheme, rest) = match endpoint.split_once("://") {
                Some((scheme @ ("http" | "https"), rest)) => (scheme, rest),
                Some(_) => {
                    return Err(format!(
                        "etcd endpoints are http://host:port or https://host:port; got {shown:?}"
                    ))
                }
                None => ("http", endpoint.as_str()),
            };
            let (credentials, host) = match rest.rsplit_once('@') {
                Some((credentials, host)) => (Some(credentials), host),
                None => (None, rest),
            };
            let host = host.trim_end_matches('/');
            let port_ok = host
                .rsplit_once(':')
                .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
            if !port_ok || host.contains(['/', '?', '#']) {
                return Err(format!(
                    "etcd endpoints are [http[s]://][user:password@]host:port; got {shown:?}"
                ));
            }
            if let Some(credentials) = credentials {
                let (name, password) = credentials.split_once(':').unwrap_or((credentials, ""));
                let what = "the credentials of an etcd endpoint";
                let given = (percent_decode(name, what)?, percent_decode(password, what)?);
                if given.0.is_empty() {
                    return Err(format!(
                        "the etcd endpoint {shown:?} has a password but no user"
                    ));
                }
                match &user {
                    Some(user) if *user != given => {
                        return Err("the etcd endpoints carry different credentials; one user \
                                    and password serve the whole cluster"
                            .into())
                    }
                    _ => user = Some(given),
                }
            }
            schemes.push(scheme);
            urls.push(format!("{scheme}://{host}"));
        }
        let tls = schemes.contains(&"https");
        if tls && schemes.contains(&"http") {
            return Err("the etcd endpoints mix http:// and https://; use one for all".into());
        }
        if tls && !cfg!(feature = "tls") {
            return Err("https:// etcd endpoints need leasehold's `tls` feature".into());
        }
        Ok(Endpoints { urls, user, tls })
    }
}
