//! `[web]`: the web console, served by the daemon beside its engine. It reads the same
//! store as `status` and `history` (with several daemons on PostgreSQL each serves the same
//! truth) and writes only the operator's intent, exactly as `enable` and `disable` do.
//!
//! - `auth`: the users file (argon2id), sessions, CSRF tokens, the login limiter;
//! - `tls`: the certificate and key files, reloaded on SIGHUP;
//! - `timeline`: a zone's states, DS and waits over time as a server-rendered SVG.

pub mod auth;
pub mod fleet;
pub mod pages;
pub mod server;
pub mod settings;
pub mod timeline;
pub mod tls;

pub use settings::{ProxySettings, TlsFiles, WebSettings};
