use std::time::Duration;

use super::*;
use crate::provider::fleet::ProviderOptions;
use crate::provider::gcore::{CredentialSource, Credentials};
use crate::provider::powerdns::PowerDnsAccount;
use crate::secret::{SecretError, SecretSource};
use crate::store::DEFAULT_LEASE;

fn parse(text: &str) -> Result<Settings, ConfigError> {
    Settings::parse(text, Path::new("/etc/test.toml"))
}

fn key_of(text: &str) -> String {
    let err = parse(text).unwrap_err();
    let message = err.to_string();
    assert!(message.contains("/etc/test.toml"), "{message}");
    err.key().map(str::to_string).unwrap_or(message)
}

/// Several accounts: named provider blocks beside the old `[provider]`, each with its kind.
#[test]
fn provider_blocks_are_named_and_typed() {
    let s = parse(
        "[provider]\napi_key_env = \"K\"\n\
         [providers.pdns-main]\nkind = \"powerdns\"\nbase_url = \"http://127.0.0.1:8081/\"\n\
         api_key_file = \"/etc/dnssec-warden/pdns-key\"\n\
         [providers.other]\nkind = \"gcore\"\nbase_url = \"https://api.example.net\"\n\
         username = \"u\"\npassword_env = \"P\"\n",
    )
    .unwrap();
    let names: Vec<&str> = s.providers.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["gcore", "other", "pdns-main"]);
    match &s.providers[2].options {
        ProviderOptions::PowerDns(PowerDnsAccount { settings, api_key }) => {
            assert_eq!(settings.base_url.as_str(), "http://127.0.0.1:8081/");
            assert_eq!(settings.server_id, "localhost");
            assert_eq!(
                *api_key,
                SecretSource::File("/etc/dnssec-warden/pdns-key".into())
            );
        }
        other => panic!("{other:?}"),
    }
    let other = s.providers[1].gcore().unwrap();
    assert_eq!(other.base_url.as_str(), "https://api.example.net/");
    // `[provider]` alone is the one Gcore account it always was.
    let s = parse("[provider]\napi_key_env = \"K\"").unwrap();
    assert_eq!(s.providers.len(), 1);
    assert_eq!(s.providers[0].name, "gcore");
    assert_eq!(
        s.providers[0].gcore().unwrap().base_url.as_str(),
        "https://api.gcore.com/"
    );
}

#[test]
fn a_wrong_provider_block_names_its_key() {
    let pdns = "[providers.p]\nkind = \"powerdns\"\n";
    for (text, key, words) in [
        (
            format!("{pdns}api_key_env = \"K\""),
            "providers.p.base_url",
            "is missing",
        ),
        (
            format!("{pdns}base_url = \"http://127.0.0.1:1/\""),
            "providers.p.api_key_file",
            "no credentials",
        ),
        (
            format!(
                "{pdns}base_url = \"http://127.0.0.1:1/\"\nusername = \"u\"\npassword_env = \"P\""
            ),
            "providers.p.username",
            "not a login",
        ),
        (
            format!(
                "{pdns}base_url = \"http://127.0.0.1:1/\"\napi_key_env = \"K\"\nserver_id = \"a/b\""
            ),
            "providers.p.server_id",
            "server id",
        ),
        (
            "[providers.g]\napi_key_env = \"K\"\nserver_id = \"localhost\"".into(),
            "providers.g.server_id",
            "powerdns",
        ),
        (
            "[providers.g]\nkind = \"bind\"\napi_key_env = \"K\"".into(),
            "providers.g.kind",
            "powerdns",
        ),
        (
            "[providers.Big]\napi_key_env = \"K\"".into(),
            "providers.Big",
            "a-z",
        ),
        (
            "[provider]\napi_key_env = \"K\"\n[providers.gcore]\napi_key_env = \"L\"".into(),
            "providers.gcore",
            "taken by [provider]",
        ),
    ] {
        let err = parse(&text).unwrap_err();
        assert_eq!(err.key(), Some(key), "{text}: {err}");
        assert!(err.to_string().contains(words), "{text}: {err}");
    }
}

#[test]
fn a_wrong_parent_block_names_its_key() {
    for (text, key, words) in [
        (
            "[parents.\"ch.\"]\nds_path = \"carrier-pigeon\"",
            "parents.\"ch.\".ds_path",
            "unknown variant",
        ),
        (
            "[parents.\"ch.\"]\nscan_period = \"daily\"",
            "parents.\"ch.\".scan_period",
            "",
        ),
        (
            "[parents.\"ch.\"]\nsurprise = 1",
            "parents.\"ch.\".surprise",
            "unknown field",
        ),
        (
            "[parents.ch]\naccepts_first_ds = \"yes\"",
            "parents.ch.accepts_first_ds",
            "",
        ),
        (
            "[parents.\"ch.\"]\nnotify_target = \"registry.ch.\"",
            "parents.\"ch.\".notify_target",
            "only for ds_path = \"notify\"",
        ),
        (
            "[parents.\"ch.\"]\nds_path = \"notify\"\nnotify_target = \"bad name!\"",
            "parents.\"ch.\".notify_target",
            "not an address or a host name",
        ),
        (
            "[parents.\"ch.\"]\nds_path = \"notify\"\nnotify_port = 70000",
            "parents.\"ch.\".notify_port",
            "1 to 65535",
        ),
        (
            "[parents.\"bad name\"]\nds_path = \"registrar\"",
            "parents.\"bad name\"",
            "",
        ),
        (
            "[parents.CH]\nds_path = \"registrar\"\n[parents.\"ch.\"]\nds_path = \"cds-scan\"",
            "parents.\"ch.\"",
            "configured twice",
        ),
    ] {
        let err = parse(text).unwrap_err();
        assert_eq!(err.key(), Some(key), "{text}: {err}");
        assert!(err.to_string().contains(words), "{text}: {err}");
    }
    // Good: normalised names, defaults filled in.
    let s = parse(
        "[parents.CH]\nds_path = \"cds-scan\"\nscan_period = \"2d\"\n\
         [parents.\"test.\"]\nds_path = \"notify\"\nnotify_target = \"Registry.Test\"\n",
    )
    .unwrap();
    let ch = &s.timing.parents.parents["ch."];
    assert_eq!(ch.scan_period, Some(Duration::from_secs(2 * 86_400)));
    let test = &s.timing.parents.parents["test."];
    assert_eq!(test.notify_target.as_deref(), Some("registry.test."));
    assert_eq!(test.notify_port, 53);
}

#[test]
fn empty_file_gives_documented_defaults() {
    let s = parse("").unwrap();
    assert!(s.providers.is_empty());
    assert_eq!(
        s.database.sqlite_path(),
        Some(Path::new("/var/lib/dnssec-warden/state.db"))
    );
    assert_eq!(s.dns.port, 53);
    assert_eq!(s.dns.root_hints.len(), 26);
    assert_eq!(s.dns.validating_resolvers.len(), 2);
    assert_eq!(s.timing.poll_waiting, Duration::from_secs(300));
    assert_eq!(s.timing.poll_active, Duration::from_secs(3600));
    assert_eq!(s.timing.ds_overdue_after, Duration::from_secs(86_400));
    assert_eq!(s.zones, ZoneSelection::Names(vec![]));
    // One Default impl per section: the lifecycle's for [timing], the settings' own.
    assert_eq!(s.timing, Policy::default());
    assert_eq!(s.dns, DnsSettings::default());
    assert_eq!(s.dns.trust_anchor_file, None);
    assert_eq!(s.alerts, AlertSettings::default());
    assert_eq!(s.database, DatabaseSettings::default());
}

/// Each value is checked as it is deserialized into its type, and the error still
/// names its key.
#[test]
fn typed_values_fail_at_their_key() {
    for (text, key, says) in [
        (
            "[timing]\nretry_base = 5",
            "timing.retry_base",
            "expected a string",
        ),
        (
            "[timing]\nretry_base = \"5 s\"",
            "timing.retry_base",
            "unknown unit",
        ),
        (
            "[dns]\naddress_families = [\"ipv5\"]",
            "dns.address_families[0]",
            "`ipv5`",
        ),
        (
            "[dns]\naddress_families = []",
            "dns.address_families",
            "ipv4",
        ),
        ("[dns]\nroot_hints = []", "dns.root_hints", "at least one"),
        (
            "[dns]\nroot_hints = [\"::1\"]\naddress_families = [\"ipv4\"]",
            "dns.root_hints",
            "no address of an enabled family",
        ),
        (
            "[dns]\nquery_attempts = 0",
            "dns.query_attempts",
            "at least 1",
        ),
        (
            "[dns]\nmax_host_lookups = 10001",
            "dns.max_host_lookups",
            "1 to 10000",
        ),
        ("[database]\npath = \"\"", "database.path", "is empty"),
        (
            "[provider]\napi_key_env = \"A=B\"",
            "provider.api_key_env",
            "variable name",
        ),
        (
            "[provider]\napi_key_credential = \"a/b\"",
            "provider.api_key_credential",
            "without '/'",
        ),
        (
            "[provider]\nusername = \" \"\npassword_env = \"P\"",
            "provider.username",
            "is empty",
        ),
        (
            "[provider]\napi_key_env = \"K\"\nmax_attempts = 0",
            "provider.max_attempts",
            "at least 1",
        ),
        (
            "[provider]\napi_key_env = \"K\"\nretry_budget = \"0s\"",
            "provider.retry_budget",
            "longer than zero",
        ),
        (
            "[provider]\napi_key_env = \"K\"\napi_key_credential = \"k\"",
            "provider.api_key_file",
            "only one of",
        ),
        (
            "[[alerts.webhook]]\nurl = \"http://a/\"\nheaders = { X-N = 1 }",
            "alerts.webhook[0].headers.X-N",
            "expected a string",
        ),
        (
            "[[alerts.webhook]]\nurl = \"http://a/\"\nheaders = { X = \"a\\u0001\" }",
            "alerts.webhook[0].headers.X",
            "header value",
        ),
        (
            "[registrar]\ncommand = \"/bin/x\"",
            "registrar.command",
            "command line",
        ),
    ] {
        let err = parse(text).unwrap_err();
        assert_eq!(err.key(), Some(key), "{text}: {err}");
        assert!(err.to_string().contains(says), "{text}: {err}");
    }
    let s = parse("[[alerts.webhook]]\nurl = \"http://a/\"\nheaders = { b = \"2\", A = \"1\" }")
        .unwrap();
    assert_eq!(
        s.alerts.webhooks[0].headers,
        [
            ("A".to_string(), "1".to_string()),
            ("b".to_string(), "2".to_string())
        ]
    );
}

#[test]
fn errors_name_the_key() {
    assert_eq!(
        key_of("[timing]\npoll_waiting = \"5x\""),
        "timing.poll_waiting"
    );
    assert_eq!(
        key_of("[timing]\npoll_active = \"0s\""),
        "timing.poll_active"
    );
    assert_eq!(key_of("[dns]\nport = 0"), "dns.port");
    assert_eq!(key_of("[dns]\nport = 70000"), "dns.port");
    assert_eq!(
        key_of("[dns]\nroot_hints = [\"1.2.3.4\", \"x\"]"),
        "dns.root_hints[1]"
    );
    assert_eq!(key_of("[zones]\nnames = [\"a..b\"]"), "zones.names[0]");
    assert_eq!(
        key_of("[zones]\nnames = [\"a.b\", \"A.b.\"]"),
        "zones.names[1]"
    );
    assert_eq!(
        key_of("[zones]\nnames = [\"a.b\"]\nall = true"),
        "zones.all"
    );
    assert_eq!(
        key_of("[provider]\nbase_url = \"ftp://x\"\napi_key_env = \"K\""),
        "provider.base_url"
    );
    assert_eq!(key_of("[provider]\n"), "provider.api_key_file");
    assert_eq!(
        key_of("[provider]\napi_key_env = \"K\"\napi_key_file = \"/k\""),
        "provider.api_key_file"
    );
    assert_eq!(key_of("[provider]\nusername = \"u\""), "provider.username");
}

/// `[cluster]` is in force with `database.url` (defaults filled in) and refused with a
/// SQLite file; a bad node name or lease is named.
#[test]
fn cluster_goes_with_postgres_only() {
    let s = parse("[database]\nurl = \"postgres://h/d\"").unwrap();
    let cluster = s.cluster.expect("always with a URL");
    assert_eq!(cluster.lease, DEFAULT_LEASE);
    assert!(!cluster.node.is_empty());
    let s = parse(
        "[database]\nurl = \"postgres://h/d\"\n[cluster]\nnode = \"ops-1.dc2\"\nlease = \"10s\"",
    )
    .unwrap();
    assert_eq!(
        s.cluster,
        Some(ClusterSettings {
            node: "ops-1.dc2".into(),
            lease: Duration::from_secs(10)
        })
    );
    assert!(parse("").unwrap().cluster.is_none());
    for (text, key, says) in [
        ("[cluster]\nnode = \"a\"", "cluster", "PostgreSQL"),
        (
            "[database]\nurl = \"postgres://h/d\"\n[cluster]\nnode = \"a b\"",
            "cluster.node",
            "not a node name",
        ),
        (
            "[database]\nurl = \"postgres://h/d\"\n[cluster]\nlease = \"500ms\"",
            "cluster.lease",
            "at least 1s",
        ),
        (
            "[database]\nurl = \"postgres://h/d\"\n[timing]\npoll_waiting = \"20s\"\n[cluster]\nlease = \"30s\"",
            "cluster.lease",
            "shorter than timing.poll_waiting",
        ),
        (
            "[database]\nurl = \"postgres://h/d\"\n[cluster]\nleases = \"3s\"",
            "cluster.leases",
            "unknown",
        ),
    ] {
        let err = parse(text).unwrap_err();
        let message = err.to_string();
        assert_eq!(err.key(), Some(key), "{text}: {message}");
        assert!(message.contains(says), "{text}: {message}");
    }
}

/// `path` or `url`, never both; the URL's password only from a secret source, never
/// in the URL, in `Debug` or in an error.
#[test]
fn database_is_a_file_or_a_postgres_url() {
    let s = parse("[database]\npath = \"state.db\"").unwrap();
    assert_eq!(s.database.sqlite_path(), Some(Path::new("/etc/state.db")));
    let s = parse(
        "[database]\nurl = \"postgres://warden@db.example:5433/warden?sslmode=require\"\n\
         password_file = \"pg-password\"",
    )
    .unwrap();
    let DatabaseSettings::Postgres(pg) = &s.database else {
        panic!("{:?}", s.database);
    };
    assert_eq!(pg.url.host_str(), Some("db.example"));
    assert_eq!(
        pg.password,
        Some(SecretSource::File("/etc/pg-password".into()))
    );
    assert_eq!(s.database.sqlite_path(), None);
    for (source, expected) in [
        (
            "password_env = \"PGPASS\"",
            SecretSource::Env("PGPASS".into()),
        ),
        (
            "password_credential = \"pg\"",
            SecretSource::Credential("pg".into()),
        ),
    ] {
        let s = parse(&format!("[database]\nurl = \"postgres://h/d\"\n{source}")).unwrap();
        assert!(
            matches!(&s.database, DatabaseSettings::Postgres(pg) if pg.password == Some(expected.clone())),
            "{source}"
        );
    }
    // No password source: peer or trust authentication, a unix socket.
    let s = parse("[database]\nurl = \"postgresql:///warden?host=/run/postgresql\"").unwrap();
    assert!(matches!(&s.database, DatabaseSettings::Postgres(pg) if pg.password.is_none()));

    for (text, key, says) in [
        (
            "[database]\npath = \"a.db\"\nurl = \"postgres://h/d\"",
            "database.url",
            "not both",
        ),
        (
            "[database]\nurl = \"mysql://h/d\"",
            "database.url",
            "postgres://",
        ),
        (
            "[database]\nurl = \"not a url\"",
            "database.url",
            "is not a URL",
        ),
        (
            "[database]\nurl = \"postgres://u:hunter2@h/d\"",
            "database.url",
            "password_file",
        ),
        (
            "[database]\nurl = \"postgres://h/d\"\npassword_env = \"A\"\npassword_file = \"/p\"",
            "database.password_file",
            "only one of",
        ),
        (
            "[database]\npassword_env = \"A\"",
            "database.password_file",
            "only for database.url",
        ),
        (
            "[database]\nurl = \"postgres://h/d\"\npassword_env = \"A=B\"",
            "database.password_env",
            "variable name",
        ),
        ("[database]\npath = \"\"", "database.path", "is empty"),
    ] {
        let err = parse(text).unwrap_err();
        let message = err.to_string();
        assert_eq!(err.key(), Some(key), "{text}: {message}");
        assert!(message.contains(says), "{text}: {message}");
        assert!(!message.contains("hunter2"), "{message}");
    }
    let s = parse("[database]\nurl = \"postgres://warden@h/d\"\npassword_env = \"P\"").unwrap();
    let debug = format!("{s:?}");
    // The settings say where the password lives, never what it is.
    assert!(debug.contains("password: Some(Env(\"P\"))"), "{debug}");
    assert_eq!(s.database.describe(), "postgres://warden@h/d");
}

#[test]
fn the_web_console_is_off_unless_listen_and_refuses_what_would_expose_it() {
    assert_eq!(parse("").unwrap().web, None);
    assert_eq!(parse("[web]").unwrap().web, None);
    let s = parse("[web]\nusers = \"web-users\"").unwrap();
    let web = s.web.unwrap();
    assert_eq!(web.listen, "127.0.0.1:8440".parse::<SocketAddr>().unwrap());
    // Relative to the file, as every path in it.
    assert_eq!(web.users, Some(PathBuf::from("/etc/web-users")));
    assert_eq!(web.tls, None);
    assert_eq!(web.session_lifetime, Duration::from_secs(8 * 3600));
    assert_eq!(web.session_idle, Duration::from_secs(3600));
    let s = parse(
        "[web]\nlisten = \"[::]:8443\"\nusers = \"/u\"\ntls_certificate = \"c.pem\"\n\
         tls_key = \"k.pem\"\nsession_lifetime = \"1h\"\nsession_idle = \"10m\"\n\
         [web.proxy]\naddresses = [\"127.0.0.1\"]\nuser_header = \"X-Remote-User\"",
    )
    .unwrap();
    let web = s.web.unwrap();
    let tls = web.tls.unwrap();
    assert_eq!(tls.certificate, PathBuf::from("/etc/c.pem"));
    assert_eq!(tls.key, PathBuf::from("/etc/k.pem"));
    let proxy = web.proxy.unwrap();
    assert_eq!(proxy.user_header, "x-remote-user");
    assert_eq!(proxy.default_role, "viewer");
    assert_eq!(web.session_idle, Duration::from_secs(600));
    for (text, key, says) in [
        (
            "[web]\nlisten = \"0.0.0.0:8440\"\nusers = \"u\"",
            "web.listen",
            "only over TLS",
        ),
        (
            "[web]\nlisten = \"192.0.2.1:8440\"\nusers = \"u\"",
            "web.listen",
            "not a loopback",
        ),
        (
            "[web]\nlisten = \"127.0.0.1:8440\"",
            "web.users",
            "users file",
        ),
        (
            "[web]\nlisten = \"127.0.0.1:1\"\nusers = \"u\"\ntls_certificate = \"c\"",
            "web.tls_key",
            "needed",
        ),
        (
            "[web]\nlisten = \"127.0.0.1:1\"\nusers = \"u\"\ntls_key = \"k\"",
            "web.tls_certificate",
            "needed",
        ),
        (
            "[web]\nlisten = \"127.0.0.1:1\"\n[web.proxy]\naddresses = [\"127.0.0.1\"]\nuser_header = \"X\"\ndefault_role = \"admin\"",
            "web.proxy.default_role",
            "not a role",
        ),
        (
            "[web]\nlisten = \"127.0.0.1:1\"\n[web.proxy]\naddresses = [\"127.0.0.1\"]\nuser_header = \"X User\"",
            "web.proxy.user_header",
            "not a header",
        ),
        (
            "[web]\nlisten = \"127.0.0.1:1\"\nusers = \"u\"\npassword = \"x\"",
            "web.password",
            "unknown field",
        ),
    ] {
        let err = parse(text).unwrap_err();
        let message = err.to_string();
        assert_eq!(err.key(), Some(key), "{text}: {message}");
        assert!(message.contains(says), "{text}: {message}");
    }
}

#[test]
fn alerts_registrar_and_metrics_defaults() {
    let s = parse("").unwrap();
    assert_eq!(s.alerts.renotify_after, Duration::from_secs(86_400));
    assert!(s.alerts.webhooks.is_empty() && s.alerts.execs.is_empty());
    assert!(s.registrar.is_none());
    assert!(s.metrics.is_none());

    let s = parse(
        "[alerts]\nrenotify_after = \"12h\"\n\
         [[alerts.webhook]]\nurl = \"https://hooks.example/T0/secret-token\"\n\
         headers = { Authorization = \"Bearer tok\" }\n\
         [[alerts.webhook]]\nurl = \"http://127.0.0.1:9/x\"\ntimeout = \"2s\"\n\
         max_attempts = 5\nbackoff = \"100ms\"\n\
         [[alerts.exec]]\ncommand = [\"/usr/local/bin/page\", \"--team\", \"dns\"]\n\
         [registrar]\ncommand = [\"/usr/local/bin/registrar-ds\"]\ntimeout = \"2m\"\n\
         [metrics]\nlisten = \"127.0.0.1:9753\"",
    )
    .unwrap();
    assert_eq!(s.alerts.renotify_after, Duration::from_secs(43_200));
    let w = &s.alerts.webhooks;
    assert_eq!(w.len(), 2);
    assert_eq!(w[0].name, "alerts.webhook[0]");
    assert_eq!(w[0].timeout, Duration::from_secs(10));
    assert_eq!(w[0].max_attempts, 3);
    assert_eq!(w[0].backoff, Duration::from_secs(1));
    assert_eq!(
        w[0].headers,
        vec![("Authorization".to_string(), "Bearer tok".to_string())]
    );
    // Neither the URL's token nor a header value is ever printed.
    let debug = format!("{:?}", w[0]);
    assert!(
        !debug.contains("secret-token") && !debug.contains("Bearer"),
        "{debug}"
    );
    assert_eq!(w[1].max_attempts, 5);
    assert_eq!(w[1].backoff, Duration::from_millis(100));
    assert_eq!(s.alerts.execs[0].name, "alerts.exec[0]");
    assert_eq!(s.alerts.execs[0].command.len(), 3);
    assert_eq!(s.alerts.execs[0].timeout, Duration::from_secs(30));
    let r = s.registrar.unwrap();
    assert_eq!(r.command, vec!["/usr/local/bin/registrar-ds".to_string()]);
    assert_eq!(r.timeout, Duration::from_secs(120));
    assert_eq!(
        s.metrics.unwrap().listen,
        "127.0.0.1:9753".parse::<SocketAddr>().unwrap()
    );
    let r = parse("[registrar]\ncommand = [\"/bin/true\"]").unwrap();
    assert_eq!(r.registrar.unwrap().timeout, Duration::from_secs(60));
}

#[test]
fn the_example_documents_the_alert_defaults() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config.example.toml");
    let example = Settings::load(&path).unwrap();
    let defaults = parse("").unwrap();
    assert_eq!(example.alerts, defaults.alerts);
    assert_eq!(example.registrar, None);
    assert_eq!(example.metrics, None);
}

#[test]
fn alert_errors_name_the_key() {
    assert_eq!(
        key_of("[alerts]\nrenotify_after = \"soon\""),
        "alerts.renotify_after"
    );
    assert_eq!(
        key_of("[[alerts.webhook]]\nurl = \"ftp://x/\""),
        "alerts.webhook[0].url"
    );
    assert_eq!(
        key_of("[[alerts.webhook]]\nurl = \"http://a/\"\n[[alerts.webhook]]\nurl = \"nope\""),
        "alerts.webhook[1].url"
    );
    assert_eq!(
        key_of("[[alerts.webhook]]\nurl = \"http://a/\"\ntimeout = \"0s\""),
        "alerts.webhook[0].timeout"
    );
    assert_eq!(
        key_of("[[alerts.webhook]]\nurl = \"http://a/\"\nmax_attempts = 0"),
        "alerts.webhook[0].max_attempts"
    );
    assert_eq!(
        key_of("[[alerts.webhook]]\nurl = \"http://a/\"\nheaders = { \"bad name\" = \"x\" }"),
        "alerts.webhook[0].headers.bad name"
    );
    assert_eq!(
        key_of("[[alerts.webhook]]\nurl = \"http://a/\"\nheaders = { X-N = 1 }"),
        "alerts.webhook[0].headers.X-N"
    );
    assert_eq!(
        key_of("[[alerts.webhook]]\ntimeout = \"1s\""),
        "alerts.webhook[0]"
    );
    assert_eq!(
        key_of("[[alerts.webhook]]\nurl = \"http://a/\"\nretries = 3"),
        "alerts.webhook[0].retries"
    );
    assert_eq!(
        key_of("[[alerts.exec]]\ncommand = []"),
        "alerts.exec[0].command"
    );
    assert_eq!(
        key_of("[[alerts.exec]]\ncommand = [\"\"]"),
        "alerts.exec[0].command[0]"
    );
    assert_eq!(
        key_of("[[alerts.exec]]\ncommand = [\"/bin/x\"]\ntimeout = \"1\""),
        "alerts.exec[0].timeout"
    );
    assert_eq!(key_of("[registrar]\ncommand = []"), "registrar.command");
    assert_eq!(key_of("[registrar]\ntimeout = \"1s\""), "registrar");
    assert_eq!(
        key_of("[registrar]\ncommand = [\"/x\"]\ntimeout = \"-1s\""),
        "registrar.timeout"
    );
    assert_eq!(
        key_of("[metrics]\nlisten = \"localhost\""),
        "metrics.listen"
    );
    assert_eq!(key_of("[metrics]\nport = 9753"), "metrics.port");
    // A bad URL is reported without echoing it: it may carry a token.
    let err = parse("[[alerts.webhook]]\nurl = \"https//hooks/secret-token\"").unwrap_err();
    assert!(!err.to_string().contains("secret-token"), "{err}");
}

#[test]
fn unknown_keys_are_named() {
    let err = parse("[timing]\npoll_wating = \"5m\"").unwrap_err();
    let text = err.to_string();
    assert!(text.contains("poll_wating"), "{text}");
    assert!(text.contains("timing"), "{text}");
    let err = parse("[provider]\napi_key = \"inline-secret\"").unwrap_err();
    let text = err.to_string();
    assert!(text.contains("api_key"), "{text}");
    assert!(!text.contains("inline-secret"), "{text}");
    let err = parse("[dnz]\nport = 53").unwrap_err();
    assert!(err.to_string().contains("dnz"), "{err}");
}

#[test]
fn syntax_errors_give_a_line() {
    let err = parse("[dns]\nport = = 5").unwrap_err();
    assert!(err.to_string().contains("line 2"), "{err}");
}

#[test]
fn login_and_api_key_sources() {
    let s = parse("[provider]\nusername = \"ops@example.com\"\npassword_env = \"PW\"").unwrap();
    assert_eq!(
        s.providers[0].gcore().unwrap().credentials.clone(),
        CredentialSource::Login {
            username: "ops@example.com".into(),
            password: SecretSource::Env("PW".into())
        }
    );
    let s = parse("[provider]\napi_key_credential = \"gcore-api-key\"").unwrap();
    assert_eq!(
        s.providers[0].gcore().unwrap().credentials.clone(),
        CredentialSource::ApiKey(SecretSource::Credential("gcore-api-key".into()))
    );
}

#[test]
fn secrets_are_read_trimmed_and_never_printed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("key");
    std::fs::write(&path, "s3cr3t-value\n").unwrap();
    let secret = SecretSource::File(path.clone()).load().unwrap();
    assert_eq!(secret.expose(), "s3cr3t-value");
    assert!(!format!("{secret:?}").contains("s3cr3t"));
    let creds = Credentials::ApiKey(secret);
    assert!(!format!("{creds:?}").contains("s3cr3t"));

    std::fs::write(&path, "\n").unwrap();
    assert!(matches!(
        SecretSource::File(path).load(),
        Err(SecretError::Empty(_))
    ));
    assert!(matches!(
        SecretSource::File(dir.path().join("missing")).load(),
        Err(SecretError::File { .. })
    ));
}

#[test]
fn zone_names_are_normalised_and_duplicates_found_after() {
    let s = parse("[zones]\nnames = [\"Bücher.example\", \"example.COM.\"]").unwrap();
    let ZoneSelection::Names(names) = s.zones else {
        panic!("names")
    };
    let names: Vec<&str> = names.iter().map(ZoneName::as_str).collect();
    assert_eq!(names, ["xn--bcher-kva.example.", "example.com."]);

    let err =
        parse("[zones]\nnames = [\"bücher.example\", \"xn--bcher-kva.example\"]").unwrap_err();
    assert_eq!(err.key(), Some("zones.names[1]"));
    let text = err.to_string();
    assert!(text.contains("\"bücher.example\""), "{text}");
    assert!(text.contains("\"xn--bcher-kva.example\""), "{text}");
    assert!(text.contains("zones.names[0]"), "{text}");

    for bad in [
        "a/b.example",
        "*.example",
        "127.0.0.1",
        ".",
        "com",
        "a\\u0000b.example",
    ] {
        let err = parse(&format!("[zones]\nnames = [\"{bad}\"]")).unwrap_err();
        assert_eq!(err.key(), Some("zones.names[0]"), "{bad}: {err}");
        assert!(err.to_string().contains("zone name"), "{err}");
    }
}

#[test]
fn relative_paths_are_relative_to_the_file() {
    let s = Settings::parse(
        "[provider]\napi_key_file = \"keys/api-key\"\n\
         [database]\npath = \"state.db\"\n[dns]\ntrust_anchor_file = \"anchors\"",
        Path::new("/etc/dnssec-warden/config.toml"),
    )
    .unwrap();
    assert_eq!(
        s.providers[0].gcore().unwrap().credentials.clone(),
        CredentialSource::ApiKey(SecretSource::File("/etc/dnssec-warden/keys/api-key".into()))
    );
    assert_eq!(
        s.database.sqlite_path(),
        Some(Path::new("/etc/dnssec-warden/state.db"))
    );
    assert_eq!(
        s.dns.trust_anchor_file,
        Some(PathBuf::from("/etc/dnssec-warden/anchors"))
    );
    let s = Settings::parse(
        "[provider]\nusername = \"u\"\npassword_file = \"../pw\"\n[database]\npath = \"/abs/state.db\"",
        Path::new("/etc/dnssec-warden/config.toml"),
    )
    .unwrap();
    assert_eq!(
        s.providers[0].gcore().unwrap().credentials.clone(),
        CredentialSource::Login {
            username: "u".into(),
            password: SecretSource::File("/etc/dnssec-warden/../pw".into()),
        }
    );
    assert_eq!(s.database.sqlite_path(), Some(Path::new("/abs/state.db")));
    // A config named relative to the working directory: its paths are too, alike.
    let s = Settings::parse("[database]\npath = \"s.db\"", Path::new("conf/c.toml")).unwrap();
    assert_eq!(s.database.sqlite_path(), Some(Path::new("conf/s.db")));
    let s = Settings::parse("[database]\npath = \"s.db\"", Path::new("c.toml")).unwrap();
    assert_eq!(s.database.sqlite_path(), Some(Path::new("s.db")));
}

#[test]
fn world_readable_secret_files_are_warned_about_without_the_secret() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("key");
    std::fs::write(&path, "s3cr3t-value\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let source = CredentialSource::ApiKey(SecretSource::File(path.clone()));
    assert!(source.exposure_warnings().is_empty());
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let warnings = source.exposure_warnings();
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].contains(&path.display().to_string()),
        "{warnings:?}"
    );
    assert!(warnings[0].contains("0644"), "{warnings:?}");
    assert!(!warnings[0].contains("s3cr3t"), "{warnings:?}");
    assert!(
        CredentialSource::ApiKey(SecretSource::Env("K".into()))
            .exposure_warnings()
            .is_empty()
    );
}

#[test]
fn servers() {
    assert_eq!(
        parse_server("1.1.1.1", 53),
        Some("1.1.1.1:53".parse().unwrap())
    );
    assert_eq!(
        parse_server("127.0.0.1:5353", 53),
        Some("127.0.0.1:5353".parse().unwrap())
    );
    assert_eq!(parse_server("::1", 53), Some("[::1]:53".parse().unwrap()));
    assert_eq!(parse_server("nope", 53), None);
}

/// The `[rollover]` block config.example.toml shows, uncommented, parses into the
/// lifecycle's rollover policy; commented out, no lifetime is set (off by default).
#[test]
fn the_example_rollover_block_parses_once_uncommented() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config.example.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let start = text.find("# [rollover]\n").expect("the example block");
    let block: String = text[start..]
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.strip_prefix("# "))
        .filter(|l| l.starts_with('[') || l.contains(" = "))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(block.lines().count() >= 6, "{block}");
    let settings = Settings::parse(&format!("{text}\n{block}"), &path)
        .unwrap_or_else(|e| panic!("{e}\n{block}"));
    let r = &settings.timing.rollover;
    let day = Duration::from_secs(86_400);
    assert_eq!(r.ksk, Some(365 * day));
    assert_eq!(r.zsk, Some(90 * day));
    assert_eq!(r.csk, Some(365 * day));
    assert_eq!(r.spread, 14 * day);
    assert_eq!(r.max_concurrent_per_account, 10);
    let off = Settings::parse(&text, &path).unwrap().timing.rollover;
    assert!(!off.on());
    assert_eq!(off, crate::lifecycle::policy::RolloverPolicy::default());
}

#[test]
fn rollover_nonsense_is_refused_naming_the_key() {
    // Zero, a bad count, an unknown key.
    assert_eq!(key_of("[rollover]\nksk = \"0s\""), "rollover.ksk");
    assert_eq!(
        key_of("[rollover]\nmax_concurrent_per_account = 0"),
        "rollover.max_concurrent_per_account"
    );
    assert_eq!(key_of("[rollover]\nkzk = \"30d\""), "rollover.kzk");
    // Shorter than one roll takes: a KSK's holds count the assumed DS TTL twice (1d) and
    // the margin four times (1h), a ZSK's the margin twice.
    let err = parse("[rollover]\nksk = \"2d\"").unwrap_err();
    assert_eq!(err.key(), Some("rollover.ksk"));
    assert!(
        err.to_string()
            .contains("2d is shorter than one ksk roll takes"),
        "{err}"
    );
    assert!(err.to_string().contains("(52h)"), "{err}");
    assert_eq!(key_of("[rollover]\nzsk = \"1h\""), "rollover.zsk");
    assert!(parse("[rollover]\nzsk = \"2h\"").is_ok());
    assert!(parse("[rollover]\nksk = \"52h\"").is_ok());
    // With a shorter margin and DS TTL assumed, shorter lifetimes fit.
    assert!(
        parse("[timing]\npropagation_margin = \"1m\"\nassumed_ds_ttl = \"1h\"\n[rollover]\nksk = \"3h\"")
            .is_ok()
    );
    // A spread as long as a lifetime.
    assert_eq!(
        key_of("[rollover]\nzsk = \"30d\"\nksk = \"365d\"\nspread = \"30d\""),
        "rollover.spread"
    );
    let s = parse("[rollover]\nzsk = \"30d\"\nspread = \"7d\"\nmax_concurrent_per_account = 3")
        .unwrap();
    assert_eq!(
        s.timing.rollover.zsk,
        Some(Duration::from_secs(30 * 86_400))
    );
    assert_eq!(s.timing.rollover.spread, Duration::from_secs(7 * 86_400));
    assert_eq!(s.timing.rollover.max_concurrent_per_account, 3);
}
