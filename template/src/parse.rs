//! The parser: one pass over the template that splits it into literal text and placeholders,
//! reads each placeholder's path, and goes on after an error so that all of them are reported.

use crate::error::{ErrorKind, TemplateError};
use crate::segment::{Field, Placeholder, Segment};

/// Parses a key template into segments, or returns every error found in it, in order.
///
/// Adjacent literal text is merged into one [`Segment::Literal`]; a template without
/// placeholders is a single literal.
///
/// # Errors
/// Every [`TemplateError`] in the template, ordered by position; never an empty list.
///
/// ```
/// use leasehold_template::{parse, ErrorKind, Segment};
///
/// assert_eq!(parse("a<<b>>").unwrap(), [Segment::Literal("a<b>".into())]);
/// let kinds: Vec<_> = parse("<> >").unwrap_err().into_iter().map(|e| e.kind).collect();
/// assert_eq!(kinds, [ErrorKind::EmptyPlaceholder, ErrorKind::StrayClose]);
/// ```
pub fn parse(template: &str) -> Result<Vec<Segment>, Vec<TemplateError>> {
    let (segments, errors) = parse_recovering(template);
    if errors.is_empty() {
        Ok(segments)
    } else {
        Err(errors)
    }
}

/// Parses as much of a key template as it can: the segments it could read and every error,
/// both in order. With no errors, the segments are exactly [`parse`]'s.
///
/// For a front end that refuses some placeholders the grammar accepts and wants to report
/// those together with the grammar's own errors. The segments of a template with errors are
/// not a key: text around a bad placeholder is merged into one literal.
pub fn parse_recovering(template: &str) -> (Vec<Segment>, Vec<TemplateError>) {
    if template.is_empty() {
        let error = TemplateError {
            span: 0..0,
            kind: ErrorKind::EmptyKey,
        };
        return (Vec::new(), vec![error]);
    }
    let mut segments = Vec::new();
    let mut errors = Vec::new();
    let mut literal = String::new();
    let bytes = template.as_bytes();
    let mut i = 0;
    // Only ASCII bytes are ever compared, so `i` always lands on a character boundary.
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
                        let span = open..end + 1;
                        match parse_path(&template[inner_start..end]) {
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
    (segments, errors)
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
        .map(|part| field(part).ok_or_else(invalid))
        .collect::<Result<_, _>>()?;
    Ok((root.to_owned(), fields))
}

/// One field of a path, the first of index, identifier and token that fits.
fn field(part: &str) -> Option<Field> {
    // `.01` is not a tuple field in Rust either.
    let canonical = part == "0" || !part.starts_with('0');
    if !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()) && canonical {
        if let Ok(index) = part.parse() {
            return Some(Field::Index(index));
        }
    }
    if is_identifier(part) && part != "self" {
        Some(Field::Named(part.to_owned()))
    } else if is_token(part) {
        Some(Field::Token(part.to_owned()))
    } else {
        None
    }
}

/// Whether `s` can be written as a Rust identifier (raw `r#` form included). Keywords other
/// than `self` are left to the front ends: no binding or path parameter has their name.
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

/// Whether `s` is an HTTP token (RFC 9110, section 5.6.2), as header names are.
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c))
}

#[cfg(test)]
mod tests {
    use std::ops::Range;

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

    fn named(s: &str) -> Field {
        Field::Named(s.to_owned())
    }

    fn token(s: &str) -> Field {
        Field::Token(s.to_owned())
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
                ph("order", &[named("customer_id")], 0..19),
                lit(":"),
                ph("path", &[Field::Index(0)], 20..28),
                lit(":"),
                ph("self", &[named("tenant"), named("name")], 29..47),
            ]
        );
        assert_eq!(
            parse("<t.4294967295>").unwrap(),
            vec![ph("t", &[Field::Index(u32::MAX)], 0..14)]
        );
    }

    #[test]
    fn header_names_are_tokens() {
        assert_eq!(
            parse("<header.X-Tenant>:<t>").unwrap(),
            vec![
                ph("header", &[token("X-Tenant")], 0..17),
                lit(":"),
                ph("t", &[], 18..21),
            ]
        );
        // HTTP tokens that are not Rust fields: kept as tokens, for the front end to judge.
        for (written, field) in [
            ("self", token("self")),
            ("01", token("01")),
            ("4294967296", token("4294967296")),
            ("r#crate", token("r#crate")),
            ("_", token("_")),
            ("a!#$%&'*+-^_`|~z", token("a!#$%&'*+-^_`|~z")),
            ("r#type", named("r#type")),
            ("größe", named("größe")),
        ] {
            let template = format!("<h.{written}>");
            assert_eq!(
                parse(&template).unwrap(),
                vec![ph("h", &[field], 0..template.len())],
                "{template}"
            );
        }
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
        for written in ["<a.b.0>", "<header.X-Tenant.01>", "<r#type.self>"] {
            let Segment::Placeholder(p) = &parse(written).unwrap()[0] else {
                panic!("not a placeholder")
            };
            assert_eq!(p.text(), written);
            assert_eq!(p.path(), written[1..written.len() - 1]);
        }
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
            "<a-b>",
            "<_>",
            "<r#self>",
            "<self.a b>",
            "<a.é-x>",
            "<header.>",
            "<header..>",
            "<header.a..b>",
            "<header.X Tenant>",
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
    fn recovering_keeps_what_parsed() {
        let (segments, errors) = parse_recovering("<a.X-Y> <");
        assert_eq!(segments, vec![ph("a", &[token("X-Y")], 0..7), lit(" ")]);
        assert_eq!(errors, parse("<a.X-Y> <").unwrap_err());
        assert_eq!(
            parse_recovering("k:<id>"),
            (parse("k:<id>").unwrap(), vec![])
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
            "<é.>",
            "<a.é>",
        ] {
            let _ = parse(t);
        }
    }
}
