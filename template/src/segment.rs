//! What a parsed template is made of: literal text and placeholders, each placeholder a root
//! followed by fields. The enums are exhaustive on purpose: a new form must be handled by
//! every front end, which is what keeps them from drifting apart.

use std::ops::Range;

/// One piece of a parsed template, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// Text copied into the key as is (escapes already undone: `<<` is stored as `<`).
    Literal(String),
    /// A `<root.field>` placeholder.
    Placeholder(Placeholder),
}

/// A `<root.field.0>` placeholder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placeholder {
    /// The identifier the path starts from, as written (raw ones keep their `r#`): for the
    /// attribute a parameter or `self`, for route rules a path parameter or `header`.
    pub root: String,
    /// The fields after the root, in order.
    pub fields: Vec<Field>,
    /// Byte range of the whole placeholder, brackets included, in the template.
    pub span: Range<usize>,
}

impl Placeholder {
    /// The placeholder's path as written, without brackets: `order.customer_id`.
    ///
    /// ```
    /// let segments = leasehold_template::parse("<header.X-Tenant>").unwrap();
    /// let leasehold_template::Segment::Placeholder(p) = &segments[0] else { unreachable!() };
    /// assert_eq!(p.path(), "header.X-Tenant");
    /// ```
    pub fn path(&self) -> String {
        let mut path = self.root.clone();
        for field in &self.fields {
            path.push('.');
            match field {
                Field::Named(name) | Field::Token(name) => path.push_str(name),
                Field::Index(index) => path.push_str(&index.to_string()),
            }
        }
        path
    }

    /// The placeholder as written, brackets included: `<order.customer_id>`.
    pub fn text(&self) -> String {
        format!("<{}>", self.path())
    }
}

/// One step of a placeholder's path after its root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Field {
    /// `.name`: a named field, any identifier but `self`.
    Named(String),
    /// `.0`: a tuple field (no leading zeros, at most `u32::MAX`).
    Index(u32),
    /// Any other HTTP token (RFC 9110 `tchar`s): `.X-Tenant`, `.self`, `.01`. Not a Rust field
    /// access, so the attribute refuses it; route rules read it as (part of) a header name.
    Token(String),
}
