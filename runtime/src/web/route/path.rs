//! Path patterns as actix-web and axum write them (`/orders/{sku}`, `/files/{*path}`), and
//! the percent-decoded parameters a pattern captures from a request path.

use crate::error::LockError;

/// The parameters a path pattern captured from a request path, percent-decoded.
///
/// ```
/// use leasehold::RouteRule;
///
/// let rule = RouteRule::new("POST", "/orders/{sku}", "stock:<sku>")?;
/// let params = rule.matches("POST", "/orders/sku%207").unwrap();
/// assert_eq!(params.get("sku"), Some("sku 7"));
/// # Ok::<(), leasehold::LockError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PathParams(Vec<(String, String)>);

impl PathParams {
    /// The value of the parameter `name`, if the pattern has it.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The parameters in pattern order, as `(name, value)`.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(n, v)| (n.as_str(), v.as_str()))
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum PathSegment {
    Literal(String),
    Param(String),
    /// `{*name}`: the rest of the path, at least one character.
    Rest(String),
}

/// A parsed path pattern: `/orders/{sku}`, `/files/{*path}`.
#[derive(Clone, Debug)]
pub(super) struct PathPattern {
    pub(super) text: String,
    segments: Vec<PathSegment>,
}

impl PathPattern {
    pub(super) fn parse(text: &str) -> Result<PathPattern, LockError> {
        let bad = |why: String| LockError::config(format!("path pattern {text:?}: {why}"));
        let Some(rest) = text.strip_prefix('/') else {
            return Err(bad(
                "a path pattern starts with `/`, e.g. \"/orders/{sku}\"".into(),
            ));
        };
        let parts: Vec<&str> = rest.split('/').collect();
        let mut segments = Vec::with_capacity(parts.len());
        for (i, part) in parts.iter().enumerate() {
            let segment = if let Some(inner) =
                part.strip_prefix('{').and_then(|p| p.strip_suffix('}'))
            {
                let (name, rest) = match inner.strip_prefix('*') {
                    Some(name) => (name, true),
                    None => (inner, false),
                };
                if !is_param_name(name) {
                    return Err(bad(format!(
                        "`{{{inner}}}` is not a parameter; write `{{name}}` with a name of \
                         letters, digits and `_`, or `{{*name}}` for the rest of the path"
                    )));
                }
                if segments
                    .iter()
                    .any(|s| matches!(s, PathSegment::Param(n) | PathSegment::Rest(n) if n == name))
                {
                    return Err(bad(format!("the parameter `{name}` appears twice")));
                }
                if rest {
                    if i + 1 != parts.len() {
                        return Err(bad(format!(
                            "`{{*{name}}}` takes the rest of the path, so it must be the last segment"
                        )));
                    }
                    PathSegment::Rest(name.to_owned())
                } else {
                    PathSegment::Param(name.to_owned())
                }
            } else if part.contains(['{', '}']) {
                return Err(bad(format!(
                    "segment {part:?} mixes text and braces; a parameter takes a whole segment, \
                     e.g. \"/files/{{name}}\""
                )));
            } else if let Some((sigil, name)) = part
                .strip_prefix(':')
                .map(|n| (':', n))
                .or_else(|| part.strip_prefix('*').map(|n| ('*', n)))
                .filter(|(_, n)| is_param_name(n))
            {
                // `/events/:id` (axum 0.7, express) would be taken literally, and the route
                // would run unlocked: refuse it, naming the syntax that works.
                let braces = if sigil == '*' {
                    format!("{{*{name}}}")
                } else {
                    format!("{{{name}}}")
                };
                return Err(bad(format!(
                    "segment `{part}` is not a parameter here: parameters are written in braces, \
                     `{braces}` (the `{sigil}{name}` syntax of axum 0.7 and older would match \
                     the text `{part}` literally, and the route would run unlocked)"
                )));
            } else {
                PathSegment::Literal((*part).to_owned())
            };
            segments.push(segment);
        }
        Ok(PathPattern {
            text: text.to_owned(),
            segments,
        })
    }

    pub(super) fn param_names(&self) -> impl Iterator<Item = &str> {
        self.segments.iter().filter_map(|s| match s {
            PathSegment::Param(n) | PathSegment::Rest(n) => Some(n.as_str()),
            PathSegment::Literal(_) => None,
        })
    }

    pub(super) fn matches(&self, path: &str) -> Option<PathParams> {
        let mut rest = path.strip_prefix('/')?;
        let mut params = Vec::new();
        for (i, segment) in self.segments.iter().enumerate() {
            let last = i + 1 == self.segments.len();
            if let PathSegment::Rest(name) = segment {
                if rest.is_empty() {
                    return None;
                }
                params.push((name.clone(), percent_decode(rest)));
                return Some(PathParams(params));
            }
            let (part, tail) = match rest.split_once('/') {
                Some((part, tail)) if !last => (part, Some(tail)),
                Some(_) => return None,
                None if last => (rest, None),
                None => return None,
            };
            match segment {
                PathSegment::Literal(lit) => {
                    if part != lit {
                        return None;
                    }
                }
                PathSegment::Param(name) => {
                    if part.is_empty() {
                        return None;
                    }
                    params.push((name.clone(), percent_decode(part)));
                }
                PathSegment::Rest(_) => unreachable!("handled above"),
            }
            rest = tail.unwrap_or("");
        }
        Some(PathParams(params))
    }
}

fn is_param_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// Decodes `%XX` escapes; gives the text unchanged if the result would not be UTF-8, as the
/// frameworks' own path extractors refuse such paths anyway.
fn percent_decode(text: &str) -> String {
    if !text.contains('%') {
        return text.to_owned();
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = |b: u8| (b as char).to_digit(16);
            if let (Some(hi), Some(lo)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((hi * 16 + lo) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| text.to_owned())
}
