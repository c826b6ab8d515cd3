//! Why a template was refused, and where: a kind for front ends to word their own messages,
//! a byte span for them to point at, and a default wording (the attribute's).

use std::fmt;
use std::ops::Range;

/// Why a template was refused, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError {
    /// Byte range in the template the error is about; both ends are character boundaries.
    pub span: Range<usize>,
    /// What is wrong.
    pub kind: ErrorKind,
}

/// What is wrong with a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    /// The template is `""`. Its span is `0..0`.
    EmptyKey,
    /// A `<` with no `>` after it. The span runs from the `<` to the end of the template.
    Unterminated,
    /// `<>`.
    EmptyPlaceholder,
    /// A `<` inside a placeholder. The span is that `<`; parsing resumes there, as it may
    /// open a placeholder of its own.
    NestedOpen,
    /// A `>` outside a placeholder that is not part of `>>`.
    StrayClose,
    /// A placeholder whose path is not `root(.field)*`; holds that path as written, without
    /// the brackets. Front ends also use it for placeholders the grammar accepts but they
    /// cannot (the attribute for a [`Field::Token`](crate::Field::Token)).
    InvalidPlaceholder(String),
}

/// The wording of `#[distributed_lock]`, whose compile errors show it as is; route rules
/// word their own from [`ErrorKind`].
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
            ErrorKind::InvalidPlaceholder(path) => write!(
                f,
                "invalid placeholder `<{path}>` at byte {at} of the key: write a parameter \
                 name, optionally followed by `.field` or `.0`, e.g. `<id>`, `<order.customer_id>`, \
                 `<path.0>`"
            ),
        }
    }
}

impl std::error::Error for TemplateError {}
