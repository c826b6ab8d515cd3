//! The names a key placeholder may start from: every binding the function's parameters
//! introduce, including those inside patterns (`Path(id): Path<u64>`), and `self`.

use syn::{FnArg, Pat, Signature};

/// The bindings of `sig`, in the order they appear, `self` first when there is a receiver.
pub(crate) fn of(sig: &Signature) -> Vec<String> {
    let mut names = Vec::new();
    for input in &sig.inputs {
        match input {
            FnArg::Receiver(_) => names.push("self".to_owned()),
            FnArg::Typed(typed) => collect(&typed.pat, &mut names),
        }
    }
    names
}

fn collect(pat: &Pat, names: &mut Vec<String>) {
    match pat {
        Pat::Ident(ident) => {
            let name = ident.ident.to_string();
            if !names.contains(&name) {
                names.push(name);
            }
            if let Some((_, sub)) = &ident.subpat {
                collect(sub, names);
            }
        }
        Pat::Tuple(tuple) => tuple.elems.iter().for_each(|p| collect(p, names)),
        Pat::TupleStruct(tuple) => tuple.elems.iter().for_each(|p| collect(p, names)),
        Pat::Struct(strukt) => strukt.fields.iter().for_each(|f| collect(&f.pat, names)),
        Pat::Slice(slice) => slice.elems.iter().for_each(|p| collect(p, names)),
        Pat::Reference(reference) => collect(&reference.pat, names),
        Pat::Paren(paren) => collect(&paren.pat, names),
        Pat::Type(typed) => collect(&typed.pat, names),
        // Every alternative binds the same names.
        Pat::Or(or) => {
            if let Some(first) = or.cases.first() {
                collect(first, names);
            }
        }
        // Literals, ranges, paths, `_`, `..`, macros: no binding we can see.
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(sig: &str) -> Vec<String> {
        of(&syn::parse_str::<Signature>(sig).unwrap())
    }

    #[test]
    fn plain_and_receiver() {
        assert_eq!(
            names("fn f(&mut self, a: u8, mut b: u8)"),
            ["self", "a", "b"]
        );
    }

    #[test]
    fn inside_patterns() {
        assert_eq!(
            names(
                "fn f(Path(id): Path<u64>, web::Path((shop, sku)): web::Path<(String, String)>, \
                 Point { x, y: ref why }: Point, [first, ..]: [u8; 4], &(a, _): &(u8, u8), \
                 all @ Some(inner): Option<u8>, _: u8)"
            ),
            ["id", "shop", "sku", "x", "why", "first", "a", "all", "inner"]
        );
    }
}
