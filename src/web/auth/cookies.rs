//! The session cookie: its `Set-Cookie` values, and a cookie read from a `Cookie` header.

use std::time::Duration;

/// The session cookie's name. `__Host-`: the browser takes it only with `Secure`,
/// `Path=/` and no `Domain`, so a sibling subdomain cannot plant one.
pub const SESSION_COOKIE: &str = "__Host-dw_session";

/// The `Set-Cookie` value for a session `token` (as [`Sessions::create`] makes it:
/// base64url, nothing to escape).
///
/// [`Sessions::create`]: super::Sessions::create
pub fn session_cookie(token: &str, max_age: Duration) -> String {
    debug_assert!(
        token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    );
    format!(
        "{SESSION_COOKIE}={token}; HttpOnly; Secure; SameSite=Strict; Path=/; Max-Age={}",
        max_age.as_secs()
    )
}

/// The `Set-Cookie` value that removes the session cookie (logout).
pub fn cleared_cookie() -> String {
    format!("{SESSION_COOKIE}=; HttpOnly; Secure; SameSite=Strict; Path=/; Max-Age=0")
}

/// The value of cookie `name` in a `Cookie` header (`a=b; c=d`), the first if repeated.
pub fn cookie_value<'a>(cookie_header: &'a str, name: &str) -> Option<&'a str> {
    cookie_header.split(';').find_map(|pair| {
        let (n, v) = pair.split_once('=')?;
        (n.trim() == name).then(|| {
            let v = v.trim();
            v.strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(v)
        })
    })
}
