//! A throwaway PostgreSQL cluster from Debian's packages (`postgresql`, which
//! `tests/run.sh` installs): `initdb` in a temporary directory (as the `postgres` user when
//! the tests run as root, the directory chowned to it), the server started directly with
//! only a unix socket in that directory (no TCP port, so it can never clash with a system
//! cluster or another test), stopped by its PID when the last user drops it.
//!
//! Tests running at the same time share one cluster (each gets a database of its own);
//! a missing installation fails the test with what to install, never skips it.
//!
//! Used by the store's unit tests (`src/store/tests.rs`), the engine rig ([`crate::rig`]),
//! the HA worlds and the PostgreSQL benchmark pass. It depends only on `sqlx`, `tempfile`
//! and the standard library, and names no `dnssec-warden` type: to the library's own unit
//! tests, this crate's `dnssec_warden` is another instance of the crate (Cargo.toml).

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use sqlx::Connection;

/// The cluster all current tests of this process share.
static SHARED: Mutex<Weak<Cluster>> = Mutex::new(Weak::new());
/// A role that logs in with a password only (see [`Cluster::password_role`]).
pub const PASSWORD_ROLE: &str = "warden";
/// Database names, unique within the process.
static NEXT_DB: AtomicU32 = AtomicU32::new(0);

pub struct Cluster {
    /// The data directory and the socket; removed after the server stopped.
    dir: tempfile::TempDir,
    server: Mutex<Child>,
    pid: u32,
}

/// The PostgreSQL programs of the newest installed major version.
fn bin_dir() -> PathBuf {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let major = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((major, bin))
        })
        .collect();
    versions.sort();
    match versions.pop() {
        Some((_, bin)) => bin,
        None => panic!(
            "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): these tests \
             need Debian's `postgresql` package; tests/run.sh installs it \
             (or: apt-get install postgresql)"
        ),
    }
}

/// The `postgres` account's uid and gid, when the tests run as root (initdb and the server
/// refuse to run as root).
fn postgres_account() -> Option<(u32, u32)> {
    let me = Command::new("id").arg("-u").output().ok()?;
    if String::from_utf8_lossy(&me.stdout).trim() != "0" {
        return None;
    }
    let id = |flag: &str| -> u32 {
        let out = Command::new("id")
            .args([flag, "postgres"])
            .output()
            .expect("id runs");
        assert!(
            out.status.success(),
            "running as root, and there is no `postgres` user to run PostgreSQL as \
             (Debian's postgresql package creates it)"
        );
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("a numeric id")
    };
    Some((id("-u"), id("-g")))
}

fn as_postgres(command: &mut Command, account: Option<(u32, u32)>) -> &mut Command {
    if let Some((uid, gid)) = account {
        command.uid(uid).gid(gid);
    }
    command
}

impl Cluster {
    /// The cluster current tests share, started if there is none.
    pub fn shared() -> Arc<Cluster> {
        let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(cluster) = shared.upgrade() {
            return cluster;
        }
        let cluster = Arc::new(Cluster::start());
        *shared = Arc::downgrade(&cluster);
        cluster
    }

    /// `initdb` and a server on a unix socket in a new temporary directory.
    pub fn start() -> Cluster {
        let started = Instant::now();
        let bin = bin_dir();
        let account = postgres_account();
        let dir = tempfile::Builder::new()
            .prefix("warden-pg")
            .tempdir()
            .expect("a temporary directory");
        if let Some((uid, gid)) = account {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))
                .expect("chown the cluster's directory to postgres");
        }
        let data = dir.path().join("data");
        let out = as_postgres(&mut Command::new(bin.join("initdb")), account)
            .arg("-D")
            .arg(&data)
            .args([
                "-U",
                "postgres",
                "--auth=trust",
                "--no-sync",
                "--no-locale",
                "-E",
                "UTF8",
            ])
            .output()
            .expect("initdb runs");
        assert!(
            out.status.success(),
            "initdb failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // The role `warden` must give its password (`PASSWORD_ROLE`), so that the password
        // sources are tested for real; every other role is trusted over the socket.
        let hba = data.join("pg_hba.conf");
        let trusted = std::fs::read_to_string(&hba).expect("initdb wrote pg_hba.conf");
        std::fs::write(
            &hba,
            format!("local all {PASSWORD_ROLE} scram-sha-256\n{trusted}"),
        )
        .expect("pg_hba.conf written");
        let log = std::fs::File::create(dir.path().join("server.log")).expect("a log file");
        if let Some((uid, gid)) = account {
            std::os::unix::fs::chown(dir.path().join("server.log"), Some(uid), Some(gid))
                .expect("chown the log");
        }
        // Only a unix socket in our directory: no TCP, nothing shared with any other
        // cluster. Durability off: a throwaway cluster.
        let server = as_postgres(&mut Command::new(bin.join("postgres")), account)
            .arg("-D")
            .arg(&data)
            .arg("-k")
            .arg(dir.path())
            .args([
                "-c",
                "listen_addresses=",
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
                "-c",
                "max_connections=200",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("postgres starts");
        let pid = server.id();
        let cluster = Cluster {
            dir,
            server: Mutex::new(server),
            pid,
        };
        cluster.wait_ready(&bin, started);
        cluster
    }

    /// Until `pg_isready` says the server accepts connections (its socket appears before
    /// the start-up is over: "the database system is starting up").
    fn wait_ready(&self, bin: &Path, started: Instant) {
        loop {
            let ready = Command::new(bin.join("pg_isready"))
                .arg("-q")
                .arg("-h")
                .arg(self.dir.path())
                .status()
                .is_ok_and(|s| s.success());
            if ready {
                return;
            }
            if let Ok(Some(status)) = self.server().try_wait() {
                panic!("postgres exited with {status}: {}", self.log());
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "postgres did not accept connections within 60 s: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn server(&self) -> std::sync::MutexGuard<'_, Child> {
        self.server.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The server's log so far, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    pub fn socket_dir(&self) -> &Path {
        self.dir.path()
    }

    /// The URL of `database` (over the socket, as the superuser, no password).
    pub fn url(&self, database: &str) -> String {
        format!(
            "postgres:///{database}?host={}&user=postgres",
            self.dir.path().display()
        )
    }

    /// A new, empty database of its own for one test; its URL.
    pub async fn database(&self) -> String {
        let name = format!(
            "warden_{}_{}",
            std::process::id(),
            NEXT_DB.fetch_add(1, Ordering::Relaxed)
        );
        self.execute(&format!("CREATE DATABASE {name}")).await;
        self.url(&name)
    }

    /// Creates the role that must log in with `password` (once per cluster: a second call
    /// fails, the role exists), owning a new database; the database's URL for that role,
    /// without the password.
    pub async fn password_role(&self, password: &str) -> String {
        let url = self.database().await;
        let database = url
            .trim_start_matches("postgres:///")
            .split('?')
            .next()
            .unwrap_or_default()
            .to_string();
        self.execute(&format!(
            "CREATE ROLE {PASSWORD_ROLE} LOGIN PASSWORD '{password}'; \
             ALTER DATABASE {database} OWNER TO {PASSWORD_ROLE}"
        ))
        .await;
        format!(
            "postgres:///{database}?host={}&user={PASSWORD_ROLE}",
            self.dir.path().display()
        )
    }

    /// One statement on the `postgres` database.
    pub async fn execute(&self, sql: &str) {
        let mut connection = sqlx::PgConnection::connect(&self.url("postgres"))
            .await
            .unwrap_or_else(|e| panic!("connect to the test cluster: {e}\n{}", self.log()));
        sqlx::raw_sql(sql)
            .execute(&mut connection)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        let _ = connection.close().await;
    }
}

impl Drop for Cluster {
    /// Fast shutdown (SIGINT) by PID, then SIGKILL if it has not ended within 10 s.
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-INT", &self.pid.to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut server = self.server();
        while Instant::now() < deadline {
            if let Ok(Some(_)) = server.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = server.kill();
        let _ = server.wait();
    }
}
