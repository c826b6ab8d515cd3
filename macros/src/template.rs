//! The attribute's reading of the key-template grammar (the `leasehold-template` crate, shared
//! with the route rules): a placeholder must be a Rust place, so `<a.X-Tenant>` is refused.
//! Resolving the roots against the function's bindings is `expand`'s job.

use leasehold_template::{ErrorKind, TemplateError};
pub use leasehold_template::{Field, Placeholder, Segment};
use syn::ext::IdentExt;

/// Parses a key template into segments, or returns every error found in it, in order.
pub fn parse(template: &str) -> Result<Vec<Segment>, Vec<TemplateError>> {
    let (segments, mut errors) = leasehold_template::parse_recovering(template);
    // Recovering, so that these are reported together with the grammar's own errors.
    for segment in &segments {
        if let Segment::Placeholder(p) = segment {
            if !p.fields.iter().all(is_rust_field) {
                errors.push(TemplateError {
                    span: p.span.clone(),
                    kind: ErrorKind::InvalidPlaceholder(p.path()),
                });
            }
        }
    }
    if errors.is_empty() {
        Ok(segments)
    } else {
        errors.sort_by_key(|e| e.span.start);
        Err(errors)
    }
}

/// Whether `.field` can follow a Rust expression. The grammar's identifiers are letters in
/// Unicode's sense, a little wider than Rust's (`ⸯ` is one), and `Ident::new` panics on those.
/// Roots need no such check: they must equal a binding, which is a Rust identifier.
fn is_rust_field(field: &Field) -> bool {
    match field {
        Field::Named(name) => syn::parse::Parser::parse_str(syn::Ident::parse_any, name).is_ok(),
        Field::Index(_) => true,
        Field::Token(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(template: &str) -> Vec<String> {
        parse(template)
            .unwrap_err()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn tokens_are_not_rust_fields() {
        for bad in [
            "<a.X-Tenant>",
            "<a.self>",
            "<a.01>",
            "<a.r#crate>",
            "<a._>",
            "<a.\u{2e2f}>",
        ] {
            assert_eq!(
                errors(bad),
                [format!(
                    "invalid placeholder `{bad}` at byte 0 of the key: write a parameter name, \
                     optionally followed by `.field` or `.0`, e.g. `<id>`, \
                     `<order.customer_id>`, `<path.0>`"
                )],
            );
        }
    }

    #[test]
    fn reported_in_order_with_the_grammar_errors() {
        let errors = errors("> <a.X-Y> <");
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert!(
            errors[0].starts_with("unmatched `>` at byte 0"),
            "{errors:?}"
        );
        assert!(errors[1].starts_with("invalid placeholder `<a.X-Y>` at byte 2"));
        assert!(errors[2].starts_with("unterminated placeholder: the `<` at byte 10"));
    }

    #[test]
    fn rust_places_pass() {
        assert_eq!(parse("k:<self.a.0>").unwrap().len(), 2);
        assert_eq!(parse("<a.größe.r#type.match>").unwrap().len(), 1);
    }
}
