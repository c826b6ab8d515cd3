//! The key template language of `#[distributed_lock(key = "...")]`: literal text with
//! `<binding.field>` placeholders, `<<` and `>>` for literal angle brackets.
//!
//! Pure and std-only on purpose: it knows nothing of syn or of the function, so it can be
//! unit-tested here and `#[path]`-included by a fuzz target (a proc-macro crate exports
//! nothing but its macros). Resolving the roots against the function's bindings is
//! `expand`'s job.

use std::fmt;
use std::ops::Range;

/// One piece of a parsed template, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// Text copied into the key as is (escapes already undone: `<<` is stored as `<`).
    Literal(String),
    /// A `<root.field.0>` placeholder, formatted with `Display`.
    Placeholder(Placeholder),
}

/// A `<root.field.0>` placeholder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placeholder {
    /// The binding the path starts from: a parameter name or `self`.
    pub root: String,
    /// The fields after the root, in order.
    pub fields: Vec<Field>,
    /// Byte range of the whole placeholder, brackets included, in the template.
    pub span: Range<usize>,
}

impl Placeholder {
    /// The placeholder as the user wrote it, brackets included.
    pub fn text(&self) -> String {
        let mut text = format!("<{}", self.root);
        for field in &self.fields {
            text.push('.');
            match field {
                Field::Named(name) => text.push_str(name),
                Field::Index(index) => text.push_str(&index.to_string()),
            }
        }
        text.push('>');
        text
    }
}

/// One step of a placeholder's path after its root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Field {
    /// `.name`: a named field.
    Named(String),
    /// `.0`: a tuple field.
    Index(u32),
}

/// Why a template was refused, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError {
    /// Byte range in the template the error is about.
    pub span: Range<usize>,
    /// What is wrong.
    pub kind: ErrorKind,
}

/// What is wrong with a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    /// The template is `""`.
    EmptyKey,
    /// A `<` with no `>` after it.
    Unterminated,
    /// `<>`.
    EmptyPlaceholder,
    /// A `<` inside a placeholder.
    NestedOpen,
    /// A `>` outside a placeholder that is not part of `>>`.
    StrayClose,
    /// A placeholder whose text is not `name(.field)*`; holds that text.
    InvalidPlaceholder(String),
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = self.span.start;
        match &self.kind {
            ErrorKind::EmptyKey => f.write_str(
                "the lock key is empty: name the resource it protects, e.g. `key = \"order:<id>\"`",
            ),
            ErrorKind::Unterminated => write!(
                f,
                "unterminated placeholder: the `<` at byte {at} of the key has no closing `>`; \
                 close it, or write `<<` for a literal `<`"
            ),
            ErrorKind::EmptyPlaceholder => write!(
                f,
                "empty placeholder `<>` at byte {at} of the key: name a parameter inside, \
                 e.g. `<id>`, or write `<<>>` for a literal `<>`"
            ),
            ErrorKind::NestedOpen => write!(
                f,
                "`<` at byte {at} of the key is inside a placeholder: close the placeholder \
                 with `>` first; placeholders do not nest"
            ),
            ErrorKind::StrayClose => write!(
                f,
                "unmatched `>` at byte {at} of the key: write `>>` for a literal `>`"
            ),
            ErrorKind::InvalidPlaceholder(text) => write!(
                f,
                "invalid placeholder `<{text}>` at byte {at} of the key: write a parameter \
                 name, optionally followed by `.field` or `.0`, e.g. `<id>`, `<order.customer_id>`, \
                 `<path.0>`"
            ),
        }
    }
}

impl std::error::Error for TemplateError {}

/// Parses a key template into segments, or returns every error found in it.
///
/// Adjacent literal text is merged into one [`Segment::Literal`]; a template without
/// placeholders is a single literal.
pub fn parse(template: &str) -> Result<Vec<Segment>, Vec<TemplateError>> {
    if template.is_empty() {
        return Err(vec![TemplateError {
            span: 0..0,
            kind: ErrorKind::EmptyKey,
        }]);
    }
    let mut segments = Vec::new();
    let mut errors = Vec::new();
    let mut literal = String::new();
    let bytes = template.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'<' if bytes.get(i + 1) == Some(&b'<') => {
                literal.push('<');
                i += 2;
            }
            b'>' if bytes.get(i + 1) == Some(&b'>') => {
                literal.push('>');
                i += 2;
            }
            b'>' => {
                errors.push(TemplateError {
                    span: i..i + 1,
                    kind: ErrorKind::StrayClose,
                });
                i += 1;
            }
            b'<' => {
                let open = i;
                let inner_start = i + 1;
                // The placeholder ends at the first `>`; a `<` before it is an error of its own.
                let close = template[inner_start..]
                    .find(['<', '>'])
                    .map(|k| inner_start + k);
                match close {
                    Some(end) if bytes[end] == b'>' => {
                        let inner = &template[inner_start..end];
                        let span = open..end + 1;
                        match parse_path(inner) {
                            Ok((root, fields)) => {
                                if !literal.is_empty() {
                                    segments.push(Segment::Literal(std::mem::take(&mut literal)));
                                }
                                segments.push(Segment::Placeholder(Placeholder {
                                    root,
                                    fields,
                                    span,
                                }));
                            }
                            Err(kind) => errors.push(TemplateError { span, kind }),
                        }
                        i = end + 1;
                    }
                    Some(nested) => {
                        errors.push(TemplateError {
                            span: nested..nested + 1,
                            kind: ErrorKind::NestedOpen,
                        });
                        // Resume at the nested `<`: it may well open a placeholder of its own.
                        i = nested;
                    }
                    None => {
                        errors.push(TemplateError {
                            span: open..template.len(),
                            kind: ErrorKind::Unterminated,
                        });
                        i = template.len();
                    }
                }
            }
            _ => {
                // Copy the whole run of ordinary text (it may hold multi-byte characters).
                let end = template[i..]
                    .find(['<', '>'])
                    .map_or(template.len(), |k| i + k);
                literal.push_str(&template[i..end]);
                i = end;
            }
        }
    }
    if !literal.is_empty() {
        segments.push(Segment::Literal(literal));
    }
    if errors.is_empty() {
        Ok(segments)
    } else {
        Err(errors)
    }
}

/// Parses the inside of a placeholder: `root(.field)*`.
fn parse_path(inner: &str) -> Result<(String, Vec<Field>), ErrorKind> {
    if inner.is_empty() {
        return Err(ErrorKind::EmptyPlaceholder);
    }
    let invalid = || ErrorKind::InvalidPlaceholder(inner.to_owned());
    let mut parts = inner.split('.');
    let root = parts.next().unwrap_or_default();
    if !is_identifier(root) {
        return Err(invalid());
    }
    let fields = parts
        .map(|part| {
            if !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()) {
                // `.01` is not a tuple field in Rust either.
                if part.len() > 1 && part.starts_with('0') {
                    return Err(invalid());
                }
                part.parse().map(Field::Index).map_err(|_| invalid())
            } else if is_identifier(part) && part != "self" {
                Ok(Field::Named(part.to_owned()))
            } else {
                Err(invalid())
            }
        })
        .collect::<Result<_, _>>()?;
    Ok((root.to_owned(), fields))
}

/// Whether `s` can be written as a Rust identifier (raw `r#` form included). Keywords other
/// than `self` fail later, when no binding has their name.
fn is_identifier(s: &str) -> bool {
    if let Some(raw) = s.strip_prefix("r#") {
        // These four cannot be raw identifiers.
        if ["self", "Self", "super", "crate"].contains(&raw) {
            return false;
        }
    }
    let s = s.strip_prefix("r#").unwrap_or(s);
    let mut chars = s.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    (first == '_' || first.is_alphabetic())
        && chars.all(|c| c == '_' || c.is_alphanumeric())
        && s != "_"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(s: &str) -> Segment {
        Segment::Literal(s.to_owned())
    }

    fn ph(root: &str, fields: &[Field], span: Range<usize>) -> Segment {
        Segment::Placeholder(Placeholder {
            root: root.to_owned(),
            fields: fields.to_vec(),
            span,
        })
    }

    fn kinds(template: &str) -> Vec<(Range<usize>, ErrorKind)> {
        parse(template)
            .unwrap_err()
            .into_iter()
            .map(|e| (e.span, e.kind))
            .collect()
    }

    #[test]
    fn plain_text_is_one_literal() {
        assert_eq!(parse("stock").unwrap(), vec![lit("stock")]);
        assert_eq!(parse("a:{b}:ü").unwrap(), vec![lit("a:{b}:ü")]);
    }

    #[test]
    fn placeholders_split_the_literal() {
        assert_eq!(
            parse("order:<id>").unwrap(),
            vec![lit("order:"), ph("id", &[], 6..10)]
        );
        assert_eq!(
            parse("<shop>/<sku>!").unwrap(),
            vec![
                ph("shop", &[], 0..6),
                lit("/"),
                ph("sku", &[], 7..12),
                lit("!")
            ]
        );
    }

    #[test]
    fn field_and_tuple_paths() {
        assert_eq!(
            parse("<order.customer_id>:<path.0>:<self.tenant.name>").unwrap(),
            vec![
                ph("order", &[Field::Named("customer_id".into())], 0..19),
                lit(":"),
                ph("path", &[Field::Index(0)], 20..28),
                lit(":"),
                ph(
                    "self",
                    &[Field::Named("tenant".into()), Field::Named("name".into())],
                    29..47
                ),
            ]
        );
    }

    #[test]
    fn doubled_brackets_are_literal() {
        assert_eq!(parse("a<<b>>c").unwrap(), vec![lit("a<b>c")]);
        assert_eq!(
            parse("<<<id>>>").unwrap(),
            vec![lit("<"), ph("id", &[], 2..6), lit(">")]
        );
        assert_eq!(parse("<<>>").unwrap(), vec![lit("<>")]);
    }

    #[test]
    fn raw_and_unicode_identifiers() {
        assert_eq!(parse("<r#type>").unwrap(), vec![ph("r#type", &[], 0..8)]);
        assert_eq!(parse("<größe>").unwrap(), vec![ph("größe", &[], 0..9)]);
    }

    #[test]
    fn placeholder_text_round_trips() {
        let Segment::Placeholder(p) = &parse("<a.b.0>").unwrap()[0] else {
            panic!("not a placeholder")
        };
        assert_eq!(p.text(), "<a.b.0>");
    }

    #[test]
    fn empty_key() {
        assert_eq!(kinds(""), vec![(0..0, ErrorKind::EmptyKey)]);
    }

    #[test]
    fn unterminated() {
        assert_eq!(kinds("order:<id"), vec![(6..9, ErrorKind::Unterminated)]);
        assert_eq!(kinds("<"), vec![(0..1, ErrorKind::Unterminated)]);
    }

    #[test]
    fn empty_placeholder() {
        assert_eq!(kinds("a<>"), vec![(1..3, ErrorKind::EmptyPlaceholder)]);
    }

    #[test]
    fn nested_open_then_goes_on() {
        assert_eq!(
            kinds("<a<b>"),
            vec![(2..3, ErrorKind::NestedOpen)],
            "the inner `<b>` is a fine placeholder of its own"
        );
    }

    #[test]
    fn stray_close() {
        assert_eq!(kinds("a>b"), vec![(1..2, ErrorKind::StrayClose)]);
        assert_eq!(kinds("<id>>"), vec![(4..5, ErrorKind::StrayClose)]);
    }

    #[test]
    fn invalid_placeholders() {
        for bad in [
            "< id>",
            "<id >",
            "<a b>",
            "<1a>",
            "<a.>",
            "<.a>",
            "<a..b>",
            "<a.01>",
            "<a-b>",
            "<_>",
            "<a.self>",
            "<r#self>",
            "<a.r#crate>",
        ] {
            let inner = bad[1..bad.len() - 1].to_owned();
            assert_eq!(
                kinds(bad),
                vec![(0..bad.len(), ErrorKind::InvalidPlaceholder(inner))],
                "{bad}"
            );
        }
    }

    #[test]
    fn reports_every_error() {
        assert_eq!(
            kinds("<> x > <a b> <ok> <"),
            vec![
                (0..2, ErrorKind::EmptyPlaceholder),
                (5..6, ErrorKind::StrayClose),
                (7..12, ErrorKind::InvalidPlaceholder("a b".into())),
                (18..19, ErrorKind::Unterminated),
            ]
        );
    }

    #[test]
    fn messages_name_the_fix() {
        let msg = |t: &str| parse(t).unwrap_err()[0].to_string();
        assert!(msg("<id").contains("write `<<` for a literal `<`"));
        assert!(msg("a>").contains("write `>>` for a literal `>`"));
        assert!(msg("<>").contains("name a parameter"));
        assert!(msg("").contains("key = \"order:<id>\""));
    }

    #[test]
    fn never_panics_on_odd_input() {
        for t in [
            "<<",
            ">>",
            "<<<",
            ">>>",
            "<\u{0}>",
            "<é",
            "é>",
            "<a.9999999999>",
            "<>>",
        ] {
            let _ = parse(t);
        }
    }
}
