//! `[web]` as the console uses it (built by `config`).

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

/// The console: where it listens, who may log in, how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebSettings {
    /// Loopback unless TLS is set (`config` refuses anything else).
    pub listen: SocketAddr,
    /// The users file (`NAME:ROLE:argon2id hash` lines), re-read on SIGHUP.
    pub users: Option<PathBuf>,
    pub tls: Option<TlsFiles>,
    /// A reverse proxy trusted to name the user in a header.
    pub proxy: Option<ProxySettings>,
    /// A session ends this long after its login, whatever its use.
    pub session_lifetime: Duration,
    /// A session unused this long ends.
    pub session_idle: Duration,
}

/// The defaults of every key but the users (none: `config` asks for a users file or a
/// proxy): on loopback, without TLS.
impl Default for WebSettings {
    fn default() -> Self {
        Self {
            listen: DEFAULT_LISTEN,
            users: None,
            tls: None,
            proxy: None,
            session_lifetime: DEFAULT_SESSION_LIFETIME,
            session_idle: DEFAULT_SESSION_IDLE,
        }
    }
}

/// The certificate chain and private key (PEM files), re-read on SIGHUP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub certificate: PathBuf,
    pub key: PathBuf,
}

/// `[web.proxy]`: the header is believed only on connections from these addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxySettings {
    pub addresses: Vec<IpAddr>,
    pub user_header: String,
    /// The role of a user the users file does not list: `viewer` or `operator`.
    pub default_role: String,
}

/// Where the console listens unless `[web] listen` says otherwise: loopback only.
pub const DEFAULT_LISTEN: SocketAddr =
    SocketAddr::new(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 8440);
pub const DEFAULT_SESSION_LIFETIME: Duration = Duration::from_secs(8 * 3600);
pub const DEFAULT_SESSION_IDLE: Duration = Duration::from_secs(3600);
