//! `status`'s filters and pages through the real binary: `--state`, `--waiting-on`,
//! `--account`, `--limit` and `--after`, for the table and `--json`; a bad value refused
//! (exit 2) naming the value and the choices.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use dnssec_warden_test_support::daemon::run;

/// A configuration with one provider account (`[provider]`: named `gcore`, its kind) and
/// the database in `dir`.
fn config(dir: &Path) -> PathBuf {
    let key = dir.join("api-key");
    std::fs::write(&key, "k-123456\n").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let config = dir.join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[provider]\nbase_url = \"http://127.0.0.1:9\"\napi_key_file = {key:?}\n\
             [database]\npath = {:?}\n[zones]\nnames = [\"a.example\", \"b.example\", \"c.example\", \"d.example\", \"e.example\"]\n",
            dir.join("state.db")
        ),
    )
    .unwrap();
    config
}

/// One statement on the database the commands made.
async fn sql(dir: &Path, statement: &str) {
    use sqlx::Connection;
    let url = format!("sqlite://{}", dir.join("state.db").display());
    let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
    sqlx::query(statement).execute(&mut conn).await.unwrap();
    conn.close().await.unwrap();
}

fn zones_of(json: &str) -> Vec<String> {
    let value: serde_json::Value = serde_json::from_str(json).unwrap();
    value["zones"]
        .as_array()
        .unwrap()
        .iter()
        .map(|z| z["zone"].as_str().unwrap().to_string())
        .collect()
}

/// The zone names of the table's rows, in order.
fn rows_of(table: &str) -> Vec<String> {
    table
        .lines()
        .skip(1)
        .filter(|l| !l.starts_with(' ') && !l.starts_with('('))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

#[tokio::test]
async fn status_filters_and_pages_the_listing() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    for zone in [
        "a.example",
        "b.example",
        "c.example",
        "d.example",
        "e.example",
    ] {
        let (code, out, err) = run(&config, &["enable", zone]);
        assert_eq!(code, 0, "{out}{err}");
    }
    // Where a daemon's steps would have left them: two active at the account, one
    // awaiting its DS, two not observed yet.
    sql(
        dir.path(),
        "UPDATE zones SET state = 'active', \
         last_brief = '{\"provider\":{\"account\":\"gcore\",\"dnssec\":\"on\"}}' \
         WHERE name IN ('b.example.', 'd.example.')",
    )
    .await;
    sql(
        dir.path(),
        "UPDATE zones SET state = 'awaiting_ds' WHERE name = 'e.example.'",
    )
    .await;

    let json = |args: &[&str]| {
        let mut all = vec!["status", "--json"];
        all.extend_from_slice(args);
        let (code, out, err) = run(&config, &all);
        assert_eq!(code, 0, "{args:?}: {err}");
        zones_of(&out)
    };
    let table = |args: &[&str]| {
        let mut all = vec!["status"];
        all.extend_from_slice(args);
        let (code, out, err) = run(&config, &all);
        assert_eq!(code, 0, "{args:?}: {err}");
        out
    };
    assert_eq!(json(&["--state", "active"]), ["b.example.", "d.example."]);
    assert_eq!(
        json(&["--state", "unobserved", "--state", "awaiting_ds"]),
        ["a.example.", "c.example.", "e.example."]
    );
    assert_eq!(json(&["--account", "gcore"]), ["b.example.", "d.example."]);
    assert_eq!(
        json(&["--waiting-on", "daemon"]),
        ["a.example.", "c.example."]
    );
    assert_eq!(
        json(&[
            "--waiting-on",
            "nobody",
            "--account",
            "gcore",
            "--limit",
            "1"
        ]),
        ["b.example."]
    );
    assert_eq!(
        rows_of(&table(&["--state", "active"])),
        ["b.example.", "d.example."]
    );
    // Pages of two, each after the last zone of the one before, make up the whole.
    let first = table(&["--limit", "2"]);
    assert_eq!(rows_of(&first), ["a.example.", "b.example."]);
    assert!(
        first.ends_with("(a page ends here; the next: --after b.example.)\n"),
        "{first}"
    );
    assert_eq!(
        json(&["--limit", "2", "--after", "b.example"]),
        ["c.example.", "d.example."]
    );
    let last = table(&["--limit", "2", "--after", "d.example."]);
    assert_eq!(rows_of(&last), ["e.example."]);
    assert!(!last.contains("next: --after"), "{last}");
    assert!(
        table(&["--state", "disabling"]).contains("(no zones match)"),
        "a filter that matches nothing says so"
    );

    // Refused, exit 2, naming the value and the choices.
    for (args, value, choices) in [
        (
            &["--state", "actve"][..],
            "actve",
            &["active", "awaiting_ds", "unobserved"][..],
        ),
        (
            &["--waiting-on", "registar"],
            "registar",
            &["registrar", "ttl", "nobody"],
        ),
        (&["--account", "other"], "other", &["gcore"]),
        (&["--after", "a..example"], "a..example", &[]),
        (&["--limit", "0"], "0", &[]),
        (&["--limit", "many"], "many", &[]),
    ] {
        for json in [false, true] {
            let mut all = vec!["status"];
            all.extend_from_slice(args);
            if json {
                all.push("--json");
            }
            let (code, out, err) = run(&config, &all);
            assert_eq!(code, 2, "{all:?}: {out}{err}");
            assert!(err.contains(value), "{all:?}: {err}");
            for choice in choices {
                assert!(err.contains(choice), "{all:?}: {err}");
            }
        }
    }
    // A zone is the whole answer: no filter beside it.
    let (code, _, err) = run(&config, &["status", "a.example", "--state", "active"]);
    assert_eq!(code, 2, "{err}");
}
