//! Key templates of route rules (`stock:<sku>`, `<header.X-Tenant>`), parsed with the
//! attribute's grammar (`leasehold-template`), resolved against the rule's path pattern, and
//! rendered for a request.

use leasehold_template::{ErrorKind, Placeholder, Segment, TemplateError};

use super::path::PathPattern;
use super::request::RequestInfo;
use crate::error::LockError;

#[derive(Clone, Debug, PartialEq, Eq)]
enum KeyPart {
    Literal(String),
    Param(String),
    Header(String),
}

/// A parsed key template, checked against a path pattern.
#[derive(Clone, Debug)]
pub(super) struct KeyTemplate {
    pub(super) text: String,
    parts: Vec<KeyPart>,
}

impl KeyTemplate {
    /// Parses with the grammar the attribute uses (`leasehold-template`), then resolves each
    /// placeholder against `path`. Reports the first error, worded for route rules.
    pub(super) fn parse(text: &str, path: &PathPattern) -> Result<KeyTemplate, LockError> {
        let bad = |why: String| LockError::config(format!("key template {text:?}: {why}"));
        let segments = leasehold_template::parse(text).map_err(|errors| bad(why(&errors[0])))?;
        let parts = segments
            .into_iter()
            .map(|segment| match segment {
                Segment::Literal(text) => Ok(KeyPart::Literal(text)),
                Segment::Placeholder(p) => placeholder(&p, path).map_err(bad),
            })
            .collect::<Result<_, _>>()?;
        Ok(KeyTemplate {
            text: text.to_owned(),
            parts,
        })
    }

    pub(super) fn render(&self, req: &RequestInfo<'_>) -> Option<String> {
        let mut key = String::new();
        for part in &self.parts {
            match part {
                KeyPart::Literal(text) => key.push_str(text),
                KeyPart::Param(name) => key.push_str(req.param(name)?),
                KeyPart::Header(name) => {
                    let value = req.header(name).filter(|v| !v.is_empty())?;
                    key.push_str(value);
                }
            }
        }
        Some(key)
    }
}

/// What is wrong with a template the grammar refused, for a `LockError::Config`.
fn why(error: &TemplateError) -> String {
    let not_a_placeholder = |text: &str| {
        format!(
            "`{text}` is not a placeholder; write a path parameter such as `<sku>` or a \
             header such as `<header.X-Tenant>`"
        )
    };
    match &error.kind {
        ErrorKind::EmptyKey => {
            "the key is empty; name the resource the route changes, e.g. \"stock:<sku>\"".into()
        }
        ErrorKind::Unterminated => "a `<` has no closing `>`; close the placeholder, or write \
                                    `<<` for a literal `<`"
            .into(),
        ErrorKind::StrayClose => "unmatched `>`; write `>>` for a literal `>`".into(),
        ErrorKind::NestedOpen => format!(
            "the `<` at byte {} is inside a placeholder; close the placeholder with `>` first \
             (placeholders do not nest), or write `<<` for a literal `<`",
            error.span.start
        ),
        ErrorKind::EmptyPlaceholder => not_a_placeholder("<>"),
        ErrorKind::InvalidPlaceholder(inner) if inner.starts_with("header.") => {
            format!("`<{inner}>` does not name a header; write e.g. `<header.X-Tenant>`")
        }
        ErrorKind::InvalidPlaceholder(inner) => not_a_placeholder(&format!("<{inner}>")),
    }
}

/// `<header.Name>` (the fields after `header`, joined by `.` as written), or `<name>` with
/// `name` a parameter of `path`.
fn placeholder(p: &Placeholder, path: &PathPattern) -> Result<KeyPart, String> {
    let inner = p.path();
    if let Some(header) = inner.strip_prefix("header.") {
        // Identifier fields may hold letters beyond ASCII, which no header name has.
        if is_header_name(header) {
            return Ok(KeyPart::Header(header.to_owned()));
        }
        return Err(format!(
            "`<{inner}>` does not name a header; write e.g. `<header.X-Tenant>`"
        ));
    }
    if p.fields.is_empty() && path.param_names().any(|n| n == p.root) {
        return Ok(KeyPart::Param(p.root.clone()));
    }
    let names: Vec<String> = path.param_names().map(|n| format!("`{n}`")).collect();
    let known = if names.is_empty() {
        format!("{:?} has no parameters", path.text)
    } else {
        format!("its parameters are: {}", names.join(", "))
    };
    Err(format!(
        "no path parameter `{inner}` in {:?}; {known} (or use `<header.Name>`)",
        path.text
    ))
}

fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c))
}
