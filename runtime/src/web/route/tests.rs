//! Unit tests of route rules: patterns, key templates, and what each refusal says.

use std::time::Duration;

use super::{HeaderLookup, RequestInfo, RouteRule};
use crate::error::LockError;
use crate::primitives::guard::OnLost;

fn key(rule: &RouteRule, method: &str, path: &str) -> Option<String> {
    let params = rule.matches(method, path)?;
    rule.key_for(&RequestInfo::new(method, path, params, &()))
}

#[test]
fn matches_method_and_path_and_builds_the_key() {
    let rule = RouteRule::new("post", "/orders/{sku}", "stock:<sku>").unwrap();
    assert_eq!(rule.method(), Some("POST"));
    assert_eq!(
        key(&rule, "POST", "/orders/a1").as_deref(),
        Some("stock:a1")
    );
    assert_eq!(
        key(&rule, "post", "/orders/a1").as_deref(),
        Some("stock:a1")
    );
    assert!(rule.matches("GET", "/orders/a1").is_none());
    assert!(rule.matches("POST", "/orders").is_none());
    assert!(rule.matches("POST", "/orders/").is_none());
    assert!(rule.matches("POST", "/orders/a1/x").is_none());
    assert!(rule.matches("POST", "/orders/a1/").is_none());
    assert!(rule.matches("POST", "orders/a1").is_none());
    assert!(rule.matches("POST", "/order/a1").is_none());
}

/// Issue 18: `/events/:id` (axum 0.7 syntax) was taken literally, and the route ran
/// unlocked. It is refused now, with the `{id}` syntax named.
#[test]
fn colon_and_star_parameters_are_refused_with_the_brace_syntax() {
    let err = RouteRule::new("POST", "/events/:id", "event:<id>").unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("`{id}`") && text.contains("axum 0.7"),
        "{text}"
    );
    let err = RouteRule::new("GET", "/files/*path", "file").unwrap_err();
    assert!(err.to_string().contains("`{*path}`"), "{err}");
    // Text that merely contains a colon stays literal (Google-style custom methods).
    let rule = RouteRule::new("POST", "/v1/things:batch", "batch").unwrap();
    assert!(rule.matches("POST", "/v1/things:batch").is_some());
}

#[test]
fn any_method_several_params_and_the_rest_of_the_path() {
    let rule = RouteRule::new("*", "/shops/{shop}/items/{item}", "item:<shop>/<item>").unwrap();
    assert_eq!(
        key(&rule, "DELETE", "/shops/s/items/7").as_deref(),
        Some("item:s/7")
    );
    let rest = RouteRule::new("PUT", "/files/{*path}", "file:<path>").unwrap();
    assert_eq!(
        key(&rest, "PUT", "/files/a/b/c.txt").as_deref(),
        Some("file:a/b/c.txt")
    );
    assert!(rest.matches("PUT", "/files/").is_none());
    assert!(rest.matches("PUT", "/files").is_none());
    let root = RouteRule::new("GET", "/", "root").unwrap();
    assert_eq!(key(&root, "GET", "/").as_deref(), Some("root"));
    assert!(root.matches("GET", "/x").is_none());
}

#[test]
fn params_are_percent_decoded() {
    let rule = RouteRule::new("POST", "/orders/{sku}", "stock:<sku>").unwrap();
    assert_eq!(
        key(&rule, "POST", "/orders/a%20b").as_deref(),
        Some("stock:a b")
    );
    assert_eq!(
        key(&rule, "POST", "/orders/%E2%82%AC").as_deref(),
        Some("stock:€")
    );
    // Not UTF-8 once decoded, or not an escape: kept as written.
    assert_eq!(
        key(&rule, "POST", "/orders/%FF").as_deref(),
        Some("stock:%FF")
    );
    assert_eq!(
        key(&rule, "POST", "/orders/100%").as_deref(),
        Some("stock:100%")
    );
    assert_eq!(
        key(&rule, "POST", "/orders/%zz1").as_deref(),
        Some("stock:%zz1")
    );
}

#[test]
fn headers_and_escapes_in_key_templates() {
    let rule = RouteRule::new("POST", "/orders/{sku}", "<<t>>:<header.X-Tenant>:<sku>").unwrap();
    let params = rule.matches("POST", "/orders/9").unwrap();
    let with = |headers: &dyn HeaderLookup| {
        rule.key_for(&RequestInfo::new(
            "POST",
            "/orders/9",
            params.clone(),
            headers,
        ))
    };
    assert_eq!(with(&[("x-tenant", "acme")]).as_deref(), Some("<t>:acme:9"));
    // A missing or empty header: no key, the request is refused.
    assert_eq!(with(&()), None);
    assert_eq!(with(&[("X-Tenant", "")]), None);
}

#[test]
fn key_closures_see_the_request() {
    let rule = RouteRule::with_key_fn("*", "/carts/{id}", |req| {
        Some(format!(
            "{}:{}:{}",
            req.method(),
            req.path(),
            req.param("id")?
        ))
    })
    .unwrap();
    assert_eq!(
        key(&rule, "PATCH", "/carts/5").as_deref(),
        Some("PATCH:/carts/5:5")
    );
    assert!(rule.key_template().is_none());
    assert!(format!("{rule:?}").contains("<closure>"));
}

fn config_error(result: Result<RouteRule, LockError>) -> String {
    match result {
        Err(e @ LockError::Config { .. }) => e.to_string(),
        other => panic!("expected a config error, got {other:?}"),
    }
}

#[test]
fn bad_rules_are_config_errors_that_say_what_is_wrong() {
    let e = config_error(RouteRule::new("POST", "/orders/{sku}", "stock:<skux>"));
    assert!(e.contains("no path parameter `skux`"), "{e}");
    assert!(e.contains("`sku`"), "{e}");
    let e = config_error(RouteRule::new("POST", "/orders", "stock:<sku>"));
    assert!(e.contains("has no parameters"), "{e}");
    let e = config_error(RouteRule::new("POST", "orders/{sku}", "k"));
    assert!(e.contains("starts with `/`"), "{e}");
    let e = config_error(RouteRule::new("POST", "/orders/{s-k}", "k"));
    assert!(e.contains("`{s-k}` is not a parameter"), "{e}");
    let e = config_error(RouteRule::new("POST", "/orders/id{sku}", "k"));
    assert!(e.contains("mixes text and braces"), "{e}");
    let e = config_error(RouteRule::new("POST", "/{a}/{a}", "k"));
    assert!(e.contains("appears twice"), "{e}");
    let e = config_error(RouteRule::new("POST", "/{*a}/b", "k"));
    assert!(e.contains("last segment"), "{e}");
    let e = config_error(RouteRule::new("PO ST", "/", "k"));
    assert!(e.contains("not an HTTP method"), "{e}");
    let e = config_error(RouteRule::new("POST", "/", ""));
    assert!(e.contains("empty"), "{e}");
    let e = config_error(RouteRule::new("POST", "/", "a<b"));
    assert!(e.contains("no closing `>`"), "{e}");
    let e = config_error(RouteRule::new("POST", "/", "a>b"));
    assert!(e.contains("unmatched `>`"), "{e}");
    let e = config_error(RouteRule::new("POST", "/", "a<>"));
    assert!(e.contains("not a placeholder"), "{e}");
    let e = config_error(RouteRule::new("POST", "/", "<header.>"));
    assert!(e.contains("does not name a header"), "{e}");
}

#[test]
fn key_templates_follow_the_attribute_grammar() {
    let rule = RouteRule::new("POST", "/t/{t}", "<header.X.Trace_1>:<<<t>>>").unwrap();
    let params = rule.matches("POST", "/t/9").unwrap();
    let headers = [("x.trace_1", "abc")];
    let req = RequestInfo::new("POST", "/t/9", params, &headers);
    assert_eq!(rule.key_for(&req).as_deref(), Some("abc:<9>"));
    // Refused by the shared grammar, which the attribute refuses too.
    for (key, says) in [
        ("<_>", "`<_>` is not a placeholder"),
        ("< t>", "`< t>` is not a placeholder"),
        ("<header..>", "`<header..>` does not name a header"),
        ("<header.a..b>", "`<header.a..b>` does not name a header"),
        ("<header.größe>", "`<header.größe>` does not name a header"),
        ("<t<t>", "the `<` at byte 2 is inside a placeholder"),
        ("<t.x>", "no path parameter `t.x`"),
        ("<r#t>", "no path parameter `r#t`"),
    ] {
        let e = config_error(RouteRule::new("POST", "/t/{t}/{_}", key));
        assert!(e.contains(says), "{key}: {e}");
    }
}

#[test]
fn rules_carry_the_attribute_options() {
    let rule = RouteRule::new("POST", "/orders/{sku}", "stock:<sku>")
        .unwrap()
        .lease(Duration::from_secs(10))
        .wait(Duration::from_secs(2))
        .watchdog(false)
        .on_lost(OnLost::Continue);
    let spec = rule.spec();
    assert_eq!(spec.lease, Some(Duration::from_secs(10)));
    assert_eq!(spec.wait, Some(Duration::from_secs(2)));
    assert_eq!(spec.watchdog, Some(false));
    assert_eq!(spec.on_lost, OnLost::Continue);
    assert_eq!(rule.path(), "/orders/{sku}");
    assert_eq!(rule.key_template(), Some("stock:<sku>"));
}
