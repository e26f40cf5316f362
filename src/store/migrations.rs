//! Each backend's schema migrations, embedded in the binary: the files of `migrations/`
//! and `migrations/postgres/`, read at compile time and handed to sqlx's migrator as its
//! source, named and checked as sqlx names them (`NNNN_description.sql`). sqlx's
//! `migrate!` macro does the same through its proc macro, which builds sqlx and SQLite's
//! C a second time for the build host: a large part of a fresh release build. A test
//! holds this list to the directory and to what sqlx's migrator reads from it at run time
//! (the same reading `migrate!` does, without its proc macro).

use std::borrow::Cow;

use futures::future::BoxFuture;
use sqlx::error::BoxDynError;
use sqlx::migrate::{Migration, MigrationSource, MigrationType, Migrator};

use super::StoreError;

/// One backend's migration files: (file name, SQL), in version order.
#[derive(Debug, Clone, Copy)]
pub(super) struct Embedded(&'static [(&'static str, &'static str)]);

macro_rules! embed {
    ($dir:literal: $($file:literal),* $(,)?) => {
        Embedded(&[$(
            ($file, include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/", $dir, "/", $file))),
        )*])
    };
}

pub(super) const SQLITE: Embedded = embed!("migrations":
    "0001_initial.sql",
    "0002_max_dnskey_ttl.sql",
    "0003_ds_to_enter_and_repeats.sql",
    "0004_facts_json_and_kinds.sql",
    "0005_awaiting_delegation.sql",
    "0006_outbox_by_zone.sql",
    "0007_due_by_time_and_name.sql",
    "0008_last_brief.sql",
    "0009_daemon_alerts.sql",
    "0010_database_meta.sql",
    "0011_deliveries.sql",
    "0012_sampled_at.sql",
    "0013_outbox_outcome.sql",
    "0014_outbox_account.sql",
    "0015_zones_by_state.sql",
);

pub(super) const POSTGRES: Embedded = embed!("migrations/postgres":
    "0001_initial.sql",
    "0002_leases.sql",
    "0003_outbox_by_zone.sql",
    "0004_due_by_time_and_name.sql",
    "0005_last_brief.sql",
    "0006_daemon_alerts.sql",
    "0007_database_meta.sql",
    "0008_deliveries.sql",
    "0009_sampled_at.sql",
    "0010_outbox_outcome.sql",
    "0011_outbox_account.sql",
    "0012_zones_by_state.sql",
);

impl Embedded {
    /// The version the last migration brings a database to (they are numbered from 1).
    #[cfg(test)]
    pub(super) fn latest(self) -> i64 {
        self.0.len() as i64
    }

    /// The migrations as sqlx's directory source reads them: the version before the
    /// first `_`, the rest of the name (`_` as spaces) the description, and a migration
    /// whose SQL starts with `-- no-transaction` run outside a transaction.
    pub(super) fn migrations(self) -> Result<Vec<Migration>, String> {
        self.0
            .iter()
            .map(|(file, sql)| {
                let (version, rest) = file
                    .split_once('_')
                    .filter(|(_, rest)| rest.ends_with(".sql"))
                    .ok_or_else(|| format!("migration {file}: not NNNN_description.sql"))?;
                let version: i64 = version
                    .parse()
                    .map_err(|_| format!("migration {file}: the version is not a number"))?;
                let kind = MigrationType::from_filename(rest);
                let description = rest.trim_end_matches(kind.suffix()).replace('_', " ");
                let no_tx = sql.starts_with("-- no-transaction");
                Ok(Migration::new(
                    version,
                    Cow::Owned(description),
                    kind,
                    Cow::Borrowed(*sql),
                    no_tx,
                ))
            })
            .collect()
    }

    /// sqlx's migrator over them.
    pub(super) async fn migrator(self) -> Result<Migrator, StoreError> {
        Migrator::new(self)
            .await
            .map_err(|e| StoreError::Corrupt(format!("the embedded migrations: {e}")))
    }

    /// The newest version among them.
    pub(super) fn newest(self) -> i64 {
        self.migrations()
            .ok()
            .and_then(|m| m.iter().map(|m| m.version).max())
            .unwrap_or(0)
    }
}

impl<'s> MigrationSource<'s> for Embedded {
    fn resolve(self) -> BoxFuture<'s, Result<Vec<Migration>, BoxDynError>> {
        Box::pin(async move { self.migrations().map_err(BoxDynError::from) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file of the directory is embedded, in order, and each reads exactly as
    /// sqlx reads the directory (version, description, checksum, transaction): a database
    /// migrated by an earlier build is recognised migration by migration.
    #[tokio::test]
    async fn the_embedded_migrations_are_the_directory_as_sqlx_reads_it() {
        let pairs = [(SQLITE, "migrations"), (POSTGRES, "migrations/postgres")];
        for (embedded, dir) in pairs {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
            let mut files: Vec<String> = std::fs::read_dir(&path)
                .unwrap()
                .filter_map(|e| e.ok())
                .filter(|e| e.path().is_file())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            files.sort();
            let listed: Vec<&str> = embedded.0.iter().map(|(f, _)| *f).collect();
            assert_eq!(listed, files, "{dir}: every file embedded, in order");
            let ours = embedded.migrations().unwrap();
            let by_sqlx = Migrator::new(path.as_path()).await.unwrap();
            let theirs: Vec<&Migration> = by_sqlx.iter().collect();
            assert_eq!(ours.len(), theirs.len(), "{dir}");
            for (a, b) in ours.iter().zip(theirs) {
                assert_eq!(a.version, b.version, "{dir}");
                assert_eq!(a.description, b.description, "{dir} {}", a.version);
                assert_eq!(a.checksum, b.checksum, "{dir} {}", a.version);
                assert_eq!(a.no_tx, b.no_tx, "{dir} {}", a.version);
                assert_eq!(a.migration_type, b.migration_type, "{dir} {}", a.version);
            }
        }
    }

    #[test]
    fn a_misnamed_migration_is_refused_by_name() {
        let bad = Embedded(&[("initial.sql", "SELECT 1;")]);
        let e = bad.migrations().unwrap_err();
        assert!(e.contains("initial.sql"), "{e}");
        let bad = Embedded(&[("x1_initial.sql", "SELECT 1;")]);
        assert!(bad.migrations().unwrap_err().contains("x1_initial.sql"));
    }
}
