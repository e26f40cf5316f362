//! What the store is opened with: the database (a SQLite file or a PostgreSQL server) and,
//! with PostgreSQL, this daemon's place among the daemons sharing it. Plain values the
//! store owns; `config` builds them from the file (`[database]`, `[cluster]`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use url::Url;

use crate::secret::SecretSource;

/// Default of `cluster.lease`: how long a daemon's hold on a zone lasts without renewal,
/// so how long its zones wait when it dies. Well under `timing.poll_waiting` (5 min).
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// `[cluster]`, with `database.url` only: several daemons share the zones by leases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSettings {
    /// This daemon's name in `status` and the metrics (default: the host name); the
    /// holder id is `<node>/<pid>`.
    pub node: String,
    pub lease: Duration,
}

impl ClusterSettings {
    /// The daemon `node`, every other key at its default.
    pub fn new(node: impl Into<String>) -> Self {
        Self {
            node: node.into(),
            lease: DEFAULT_LEASE,
        }
    }
}

/// `[database]`: the SQLite file (`path`, the default) or a PostgreSQL server (`url`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatabaseSettings {
    Sqlite { path: PathBuf },
    Postgres(PostgresSettings),
}

impl DatabaseSettings {
    /// The SQLite file, if that is the store.
    pub fn sqlite_path(&self) -> Option<&Path> {
        match self {
            Self::Sqlite { path } => Some(path),
            Self::Postgres(_) => None,
        }
    }

    /// What log lines and messages call the database: the file, or the URL (which never
    /// holds a password: the file refuses one).
    pub fn describe(&self) -> String {
        match self {
            Self::Sqlite { path } => path.display().to_string(),
            Self::Postgres(pg) => pg.url.to_string(),
        }
    }
}

impl Default for DatabaseSettings {
    fn default() -> Self {
        Self::Sqlite {
            path: DEFAULT_DATABASE_PATH.into(),
        }
    }
}

/// Default of `database.path`: where the package keeps the SQLite file.
pub const DEFAULT_DATABASE_PATH: &str = "/var/lib/dnssec-warden/state.db";

/// A PostgreSQL database: where, and where its password lives (read when the store is
/// opened, like the provider's key; `None`: no password, e.g. peer authentication over a
/// unix socket).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresSettings {
    /// `postgres://user@host:port/database?sslmode=…`, without a password.
    pub url: Url,
    pub password: Option<SecretSource>,
}

impl PostgresSettings {
    /// The server at `url`, without a password source.
    pub fn new(url: Url) -> Self {
        Self {
            url,
            password: None,
        }
    }
}
