use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use argon2::password_hash::{PasswordHash, PasswordHasher, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::limiter::backoff;
use super::sessions::{same_secret, sha256};
use super::*;
use crate::time::Timestamp;

const T0: Timestamp = Timestamp(1_700_000_000_000);

fn at(ms: u64) -> Timestamp {
    T0.plus(Duration::from_millis(ms))
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// An argon2id hash at a test's cost (fast in a debug build).
fn hash_at(password: &str, m: u32, t: u32) -> String {
    let params = Params::new(m, t, 1, None).unwrap();
    let salt = SaltString::encode_b64(b"0123456789abcdef").unwrap();
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
        .hash_password(password.as_bytes(), &salt)
        .unwrap()
        .to_string()
}

fn cheap(password: &str) -> String {
    hash_at(password, 8, 1)
}

/// A well-formed PHC string of `algorithm` with the given parameters; never verified.
fn phc(algorithm: &str, version: &str, params: &str) -> String {
    format!(
        "${algorithm}${version}${params}$c2FsdHNhbHRzYWx0c2FsdA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
    )
}

fn v4(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))
}

#[test]
fn roles_read_and_write_their_two_words_only() {
    for role in [Role::Viewer, Role::Operator] {
        assert_eq!(role.as_str().parse::<Role>().unwrap(), role);
        assert_eq!(role.to_string(), role.as_str());
    }
    assert_eq!("viewer".parse::<Role>().unwrap(), Role::Viewer);
    assert_eq!("operator".parse::<Role>().unwrap(), Role::Operator);
    for bad in ["Operator", "admin", "", " viewer", "operators"] {
        assert!(bad.parse::<Role>().is_err(), "{bad:?}");
    }
}

#[test]
fn a_user_name_is_1_to_64_of_a_small_alphabet() {
    let long = "a".repeat(64);
    for good in ["a", "alice", "a.b_c@d-e", "Z9", long.as_str()] {
        assert!(valid_user_name(good), "{good:?}");
    }
    let too_long = "a".repeat(65);
    for bad in [
        "",
        too_long.as_str(),
        "a b",
        "a:b",
        "ä",
        "a/b",
        "a\n",
        "<b>",
    ] {
        assert!(!valid_user_name(bad), "{bad:?}");
    }
}

#[test]
fn the_users_file_has_one_user_a_line_with_comments_and_blanks() {
    let text = format!(
        "# the console's users\n\n  alice:operator:{}\r\n# bob looks only\nbob:viewer:{}\n   \n",
        cheap("alice's long password"),
        cheap("bob's long password!")
    );
    let users = Users::parse(&text, "users").unwrap();
    assert_eq!(users.len(), 2);
    assert_eq!(users.names(), ["alice", "bob"]);
    assert_eq!(users.role_of("alice"), Some(Role::Operator));
    assert_eq!(users.role_of("bob"), Some(Role::Viewer));
    assert_eq!(users.role_of("carol"), None);
    let empty = Users::parse("# nobody yet\n", "users").unwrap();
    assert!(empty.is_empty());
    assert_eq!(empty.verify("alice", "alice's long password"), None);
}

#[test]
fn each_bad_line_is_named_with_its_number_and_never_quotes_the_hash() {
    let good = cheap("a good long password");
    let cases: Vec<(String, LineProblem)> = vec![
        ("alice:operator".into(), LineProblem::Format),
        ("just-a-password-pasted-here".into(), LineProblem::Format),
        (format!("al ice:viewer:{good}"), LineProblem::Name),
        (
            format!("{}:viewer:{good}", "a".repeat(65)),
            LineProblem::Name,
        ),
        (
            format!("Bob:viewer:{good}"),
            LineProblem::Duplicate {
                name: "Bob".into(),
                first: 2,
            },
        ),
        (
            format!("carol:admin:{good}"),
            LineProblem::Role(Some("admin".into())),
        ),
        (format!("carol:hunter2!:{good}"), LineProblem::Role(None)),
        (
            format!("carol:viewer:{}", phc("argon2i", "v=19", "m=8,t=1,p=1")),
            LineProblem::Algorithm("argon2i"),
        ),
        (
            format!("carol:viewer:{}", phc("argon2d", "v=19", "m=8,t=1,p=1")),
            LineProblem::Algorithm("argon2d"),
        ),
        (
            "carol:viewer:$2b$12$R9h/cIPz0gi.URNNX3kh2OPST9/PgBkqquzi.Ss7KIUgO2t0jWMUW".into(),
            LineProblem::NotArgon2id,
        ),
        (
            "carol:viewer:correct horse battery".into(),
            LineProblem::NotArgon2id,
        ),
        (
            format!("carol:viewer:{}", phc("scrypt", "v=19", "m=8,t=1,p=1")),
            LineProblem::NotArgon2id,
        ),
        (
            format!("carol:viewer:{}", phc("argon2id", "v=16", "m=8,t=1,p=1")),
            LineProblem::Version,
        ),
        (
            format!(
                "carol:viewer:{}",
                phc("argon2id", "m=8", "t=1,p=1").replace("$m=8$", "$m=8,")
            ),
            LineProblem::Version,
        ),
        (
            format!(
                "carol:viewer:{}",
                phc("argon2id", "v=19", "m=262145,t=1,p=1")
            ),
            LineProblem::Cost {
                param: "m",
                value: 262_145,
                bound: MAX_M_COST,
            },
        ),
        (
            format!("carol:viewer:{}", phc("argon2id", "v=19", "m=64,t=17,p=1")),
            LineProblem::Cost {
                param: "t",
                value: 17,
                bound: MAX_T_COST,
            },
        ),
        (
            format!("carol:viewer:{}", phc("argon2id", "v=19", "m=128,t=1,p=9")),
            LineProblem::Cost {
                param: "p",
                value: 9,
                bound: MAX_P_COST,
            },
        ),
        (
            format!("carol:viewer:{}", phc("argon2id", "v=19", "m=8,t=0,p=1")),
            LineProblem::Params,
        ),
    ];
    for (line, want) in cases {
        // Line 2 is bob's; the line under test is line 4.
        let text = format!("# users\nbob:viewer:{good}\n\n{line}\n");
        let err = Users::parse(&text, "/etc/dnssec-warden/users").unwrap_err();
        let said = err.to_string();
        match &err {
            AuthError::Line {
                file,
                line: 4,
                problem,
            } => {
                assert_eq!(file, "/etc/dnssec-warden/users");
                assert_eq!(problem, &want, "{line}");
            }
            other => panic!("{line}: {other:?}"),
        }
        assert!(
            said.starts_with("/etc/dnssec-warden/users line 4: "),
            "{said}"
        );
        let hash = line.splitn(3, ':').nth(2).unwrap_or(&line);
        assert!(!said.contains(hash), "{said}");
        assert!(!said.contains("c2FsdHNhbHRzYWx0c2FsdA"), "{said}");
        assert!(!said.contains("hunter2"), "{said}");
    }
}

#[test]
fn costs_up_to_the_bounds_are_accepted() {
    let text = format!(
        "a:viewer:{}\nb:viewer:{}\n",
        phc("argon2id", "v=19", "m=262144,t=16,p=8"),
        phc("argon2id", "v=19", "m=8,t=1,p=1")
    );
    let users = Users::parse(&text, "users").unwrap();
    assert_eq!(users.len(), 2);
}

#[test]
fn a_password_verifies_for_its_user_only() {
    let text = format!(
        "alice:operator:{}\nbob:viewer:{}\n",
        cheap("alice's long password"),
        cheap("bob's long password!")
    );
    let users = Users::parse(&text, "users").unwrap();
    assert_eq!(
        users.verify("alice", "alice's long password"),
        Some(Role::Operator)
    );
    assert_eq!(
        users.verify("bob", "bob's long password!"),
        Some(Role::Viewer)
    );
    assert_eq!(users.verify("alice", "bob's long password!"), None);
    assert_eq!(users.verify("alice", "alice's long passwor"), None);
    assert_eq!(users.verify("alice", ""), None);
    // Names are exact; an unknown one never logs in, whatever the password.
    assert_eq!(users.verify("Alice", "alice's long password"), None);
    assert_eq!(users.verify("mallory", "alice's long password"), None);
    assert_eq!(users.verify("mallory", ""), None);
}

#[test]
fn a_made_password_is_24_url_safe_characters_never_the_same_and_hashes() {
    let made: Vec<String> = (0..16).map(|_| random_password().unwrap()).collect();
    for p in &made {
        assert_eq!(p.len(), 24, "{p}");
        assert!(
            p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
            "{p}"
        );
    }
    let distinct: std::collections::HashSet<_> = made.iter().collect();
    assert_eq!(distinct.len(), made.len());
    // Long enough for the users file's own rule.
    assert!(made[0].chars().count() >= MIN_PASSWORD_CHARS);
    let users = Users::parse(&format!("demo:operator:{}\n", cheap(&made[0])), "u").unwrap();
    assert_eq!(users.verify("demo", &made[0]), Some(Role::Operator));
    assert_eq!(users.verify("demo", &made[1]), None);
}

#[test]
fn a_password_over_the_length_bound_is_refused_without_hashing() {
    let long = "x".repeat(MAX_PASSWORD_BYTES + 1);
    let users = Users::parse(&format!("alice:viewer:{}\n", cheap(&long)), "u").unwrap();
    assert_eq!(users.verify("alice", &long), None);
    let at_bound = "x".repeat(MAX_PASSWORD_BYTES);
    let users = Users::parse(&format!("alice:viewer:{}\n", cheap(&at_bound)), "u").unwrap();
    assert_eq!(users.verify("alice", &at_bound), Some(Role::Viewer));
}

#[test]
fn an_unknown_name_costs_what_the_users_hashes_cost() {
    // Two users at one cost, one at another: the dummy takes the common one.
    let text = format!(
        "a:viewer:{}\nb:viewer:{}\nc:viewer:{}\n",
        cheap("a long password a"),
        hash_at("a long password b", 2048, 2),
        hash_at("a long password c", 2048, 2),
    );
    let users = Users::parse(&text, "u").unwrap();
    let dummy = users.dummy.password_hash();
    assert_eq!(dummy.algorithm.as_str(), "argon2id");
    assert_eq!(dummy.params.to_string(), "m=2048,t=2,p=1");
    assert_eq!(dummy.hash.map(|h| h.len()), Some(32));
    // And it is verified against: as slow as a known name, not answered at once.
    let time = |name: &str| {
        (0..5)
            .map(|_| {
                let start = Instant::now();
                assert_eq!(users.verify(name, "a wrong password"), None);
                start.elapsed()
            })
            .min()
            .unwrap()
    };
    let (known, unknown) = (time("b"), time("nobody"));
    // Without the dummy an unknown name is answered ~1000 times faster; a factor of
    // 10 leaves room for a loaded machine.
    assert!(unknown * 10 > known, "known {known:?}, unknown {unknown:?}");
    // With no user at all, OWASP's cost.
    let none = Users::parse("", "u").unwrap();
    assert_eq!(
        none.dummy.password_hash().params.to_string(),
        "m=19456,t=2,p=1"
    );
}

#[test]
fn the_users_file_is_read_from_its_path_and_a_missing_one_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("users");
    std::fs::write(
        &path,
        format!("alice:viewer:{}\n", cheap("a long password!")),
    )
    .unwrap();
    let users = Users::load(&path).unwrap();
    assert_eq!(
        users.verify("alice", "a long password!"),
        Some(Role::Viewer)
    );
    let missing = dir.path().join("no-such-users");
    let err = Users::load(&missing).unwrap_err();
    assert!(matches!(err, AuthError::Read { .. }), "{err:?}");
    assert!(err.to_string().contains("no-such-users"), "{err}");
    std::fs::write(&path, "alice:viewer:plain\n").unwrap();
    let err = Users::load(&path).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!("{} line 1:", path.display())),
        "{err}"
    );
}

#[test]
fn a_reload_names_the_users_dropped_or_changed() {
    let (a, b, c) = (
        cheap("password of a!"),
        cheap("password of b!"),
        cheap("password of c!"),
    );
    let old = Users::parse(
        &format!("a:viewer:{a}\nb:viewer:{b}\nc:operator:{c}\nd:viewer:{a}\n"),
        "u",
    )
    .unwrap();
    let new = Users::parse(
        &format!("a:viewer:{a}\nb:operator:{b}\nd:viewer:{b}\ne:viewer:{c}\n"),
        "u",
    )
    .unwrap();
    assert_eq!(old.dropped_or_changed(&new), ["b", "c", "d"]);
    assert!(old.dropped_or_changed(&old.clone()).is_empty());
}

#[test]
fn debug_output_shows_no_hash() {
    let users = Users::parse(
        &format!("alice:viewer:{}\n", cheap("a long password!")),
        "u",
    )
    .unwrap();
    let shown = format!("{users:?}");
    assert!(
        shown.contains("alice") && shown.contains("Viewer"),
        "{shown}"
    );
    assert!(!shown.contains("argon2"), "{shown}");
}

#[test]
fn hash_password_makes_an_owasp_argon2id_line_the_users_file_accepts() {
    let first = hash_password("correct horse battery").unwrap();
    let parsed = PasswordHash::new(&first).unwrap();
    assert_eq!(parsed.algorithm.as_str(), "argon2id");
    assert_eq!(parsed.version, Some(19));
    assert_eq!(parsed.params.to_string(), "m=19456,t=2,p=1");
    // A random salt: the same password hashes differently.
    assert_ne!(first, hash_password("correct horse battery").unwrap());
    let users = Users::parse(&format!("alice:operator:{first}\n"), "u").unwrap();
    assert_eq!(
        users.verify("alice", "correct horse battery"),
        Some(Role::Operator)
    );
    assert_eq!(users.verify("alice", "correct horse batter"), None);
}

#[test]
fn hash_password_refuses_short_and_overlong_passwords() {
    assert!(matches!(
        hash_password("elevenchars"),
        Err(AuthError::PasswordTooShort)
    ));
    assert!(matches!(
        hash_password(""),
        Err(AuthError::PasswordTooShort)
    ));
    // Characters, not bytes: eleven two-byte characters are too few.
    assert!(matches!(
        hash_password(&"é".repeat(11)),
        Err(AuthError::PasswordTooShort)
    ));
    assert!(matches!(
        hash_password(&"x".repeat(MAX_PASSWORD_BYTES + 1)),
        Err(AuthError::PasswordTooLong)
    ));
    assert!(matches!(
        hash_password(&"é".repeat(MAX_PASSWORD_BYTES / 2 + 1)),
        Err(AuthError::PasswordTooLong)
    ));
    let said = AuthError::PasswordTooShort.to_string();
    assert!(said.contains("12 characters"), "{said}");
}

#[test]
fn hash_password_accepts_the_bounds_themselves() {
    assert!(hash_password("twelve chars").is_ok());
    assert!(hash_password(&"x".repeat(MAX_PASSWORD_BYTES)).is_ok());
}

fn sessions() -> Sessions {
    Sessions::new(secs(10), secs(5), 100)
}

#[test]
fn a_session_has_two_random_url_safe_secrets() {
    let s = sessions();
    let a = s.create("alice", Role::Operator, T0).unwrap();
    let b = s.create("alice", Role::Operator, T0).unwrap();
    for secret in [&a.token, &a.csrf, &b.token, &b.csrf] {
        assert_eq!(secret.len(), 43, "{secret}");
        assert!(URL_SAFE_NO_PAD.decode(secret).is_ok_and(|b| b.len() == 32));
    }
    assert_ne!(a.token, a.csrf);
    assert_ne!(a.token, b.token);
    assert_ne!(a.csrf, b.csrf);
    assert_eq!(a.expires, at(10_000));
    assert_eq!(s.get(&a.token, at(1)), Some(a.clone()));
    assert_eq!(s.get(&b.token, at(1)).unwrap().csrf, b.csrf);
    assert_eq!(s.get("", at(1)), None);
    assert_eq!(s.get(&a.csrf, at(1)), None);
    let shown = format!("{a:?}");
    assert!(
        !shown.contains(&a.token) && !shown.contains(&a.csrf),
        "{shown}"
    );
}

#[test]
fn a_session_ends_at_its_absolute_lifetime_however_used() {
    let s = sessions();
    let a = s.create("alice", Role::Viewer, T0).unwrap();
    for ms in [4_000, 8_000, 9_999] {
        assert!(s.get(&a.token, at(ms)).is_some(), "{ms}");
    }
    assert_eq!(s.get(&a.token, at(10_000)), None);
    assert!(s.is_empty());
}

#[test]
fn a_session_ends_when_idle_and_each_use_restarts_the_idle_clock() {
    // An hour's lifetime: only the 5 s idle timeout ends these.
    let s = Sessions::new(secs(3600), secs(5), 100);
    let a = s.create("alice", Role::Viewer, T0).unwrap();
    assert!(s.get(&a.token, at(4_999)).is_some());
    // 9 s after creation, but only 4 s after the last use.
    assert!(s.get(&a.token, at(9_000)).is_some());
    assert_eq!(s.get(&a.token, at(14_000)), None);
    // Removed, not only refused: an earlier clock does not bring it back.
    assert_eq!(s.len(), 0);
    assert_eq!(s.get(&a.token, at(9_001)), None);
    let b = s.create("bob", Role::Viewer, T0).unwrap();
    assert!(s.get(&b.token, at(4_999)).is_some());
    assert!(s.get(&b.token, at(9_998)).is_some());
    assert_eq!(s.get(&b.token, at(14_998)), None);
}

#[test]
fn sessions_are_removed_one_by_user_or_by_rule() {
    let s = sessions();
    let a1 = s.create("alice", Role::Operator, T0).unwrap();
    let a2 = s.create("alice", Role::Operator, T0).unwrap();
    let b = s.create("bob", Role::Viewer, T0).unwrap();
    let c = s.create("carol", Role::Operator, T0).unwrap();
    s.remove(&a1.token);
    assert_eq!(s.get(&a1.token, T0), None);
    assert!(s.get(&a2.token, T0).is_some());
    s.remove_user("alice");
    assert_eq!(s.get(&a2.token, T0), None);
    assert!(s.get(&b.token, T0).is_some());
    s.retain(|_, role| role == Role::Viewer);
    assert_eq!(s.get(&c.token, T0), None);
    assert!(s.get(&b.token, T0).is_some());
    assert_eq!(s.len(), 1);
    s.purge_expired(at(5_000));
    assert!(s.is_empty());
}

#[test]
fn past_the_limit_the_oldest_session_goes() {
    let s = Sessions::new(secs(3600), secs(600), 3);
    let made: Vec<Session> = (0..4)
        .map(|i| s.create(&format!("u{i}"), Role::Viewer, at(i)).unwrap())
        .collect();
    assert_eq!(s.len(), 3);
    assert_eq!(s.get(&made[0].token, at(10)), None);
    for m in &made[1..] {
        assert!(s.get(&m.token, at(10)).is_some(), "{}", m.user);
    }
}

#[test]
fn past_the_limit_an_expired_session_goes_before_the_oldest() {
    let s = Sessions::new(secs(3600), secs(10), 2);
    let old = s.create("old", Role::Viewer, T0).unwrap();
    let idle = s.create("idle", Role::Viewer, at(1_000)).unwrap();
    assert!(s.get(&old.token, at(9_000)).is_some());
    // At 12 s `idle` has been idle 11 s; `old` only 3 s.
    let new = s.create("new", Role::Viewer, at(12_000)).unwrap();
    assert!(s.get(&old.token, at(12_000)).is_some());
    assert!(s.get(&new.token, at(12_000)).is_some());
    assert_eq!(s.get(&idle.token, at(1_000)), None);
}

#[test]
fn the_table_holds_digests_of_the_tokens_not_the_tokens() {
    let s = sessions();
    let a = s.create("alice", Role::Viewer, T0).unwrap();
    let table = lock(&s.table);
    assert!(table.by_key.contains_key(&sha256(a.token.as_bytes())));
    assert!(
        !table
            .by_key
            .keys()
            .any(|k| k.as_slice() == a.token.as_bytes())
    );
}

#[test]
fn only_the_sessions_own_csrf_token_passes() {
    let s = sessions();
    let a = s.create("alice", Role::Operator, T0).unwrap();
    let b = s.create("alice", Role::Operator, T0).unwrap();
    assert!(a.csrf_ok(&a.csrf));
    let mut last_changed = a.csrf.clone();
    last_changed.pop();
    last_changed.push(if a.csrf.ends_with('A') { 'B' } else { 'A' });
    for wrong in [
        "",
        &a.csrf[..42],
        &format!("{}A", a.csrf),
        &last_changed,
        &a.token,
        &b.csrf,
    ] {
        assert!(!a.csrf_ok(wrong), "{wrong:?}");
    }
    assert!(same_secret("x", "x") && !same_secret("x", "y"));
}

#[test]
fn the_shared_tables_can_be_shared() {
    fn shared<T: Send + Sync>() {}
    shared::<Sessions>();
    shared::<LoginLimiter>();
    shared::<Users>();
}

#[test]
fn at_most_five_login_attempts_a_second_in_all() {
    let l = LoginLimiter::new();
    for i in 0..5 {
        assert_eq!(
            l.check(&format!("u{i}"), v4(i), at(u64::from(i) * 10)),
            Ok(())
        );
    }
    assert_eq!(
        l.check("other", v4(9), at(300)),
        Err(Duration::from_millis(700))
    );
    assert_eq!(
        l.check("other", v4(9), at(999)),
        Err(Duration::from_millis(1))
    );
    // The first attempt's second is over: one more may go.
    assert_eq!(l.check("other", v4(9), at(1_000)), Ok(()));
    assert_eq!(
        l.check("other", v4(9), at(1_005)),
        Err(Duration::from_millis(5))
    );
    assert_eq!(l.check("other", v4(9), at(1_010)), Ok(()));
}

/// Fails `user` from `addr` `n` times a second apart from `start` ms (each checked
/// first, as the handler does); the time of the last failure.
fn fail_n(l: &LoginLimiter, user: &str, addr: IpAddr, start: u64, n: u64) -> u64 {
    let mut t = start;
    for i in 0..n {
        t = start + i * 1_000;
        assert_eq!(l.check(user, addr, at(t)), Ok(()), "attempt {i}");
        l.failed(user, addr, at(t));
    }
    t
}

#[test]
fn after_three_failures_each_attempt_waits_doubling_to_fifteen_minutes() {
    let l = LoginLimiter::new();
    let t = fail_n(&l, "alice", v4(1), 0, 3);
    assert_eq!(l.check("alice", v4(1), at(t)), Err(secs(1)));
    assert_eq!(
        l.check("alice", v4(1), at(t + 999)),
        Err(Duration::from_millis(1))
    );
    let mut t = t + 1_000;
    let mut wait = 1_000;
    for _ in 0..12 {
        assert_eq!(l.check("alice", v4(1), at(t)), Ok(()));
        l.failed("alice", v4(1), at(t));
        wait = (wait * 2).min(15 * 60 * 1_000);
        assert_eq!(
            l.check("alice", v4(1), at(t)),
            Err(Duration::from_millis(wait))
        );
        t += wait;
    }
    assert_eq!(wait, 15 * 60 * 1_000);
    assert_eq!(backoff(u32::MAX), MAX_WAIT);
}

#[test]
fn the_back_off_is_kept_per_user_name_and_per_address() {
    let l = LoginLimiter::new();
    // alice from three addresses: alice waits from a fourth.
    for (i, a) in [1, 2, 3].into_iter().enumerate() {
        fail_n(&l, "alice", v4(a), i as u64 * 1_000, 1);
    }
    assert_eq!(
        l.check("alice", v4(4), at(2_500)),
        Err(Duration::from_millis(500))
    );
    // Its name in capitals, or followed by more than 64 characters, is the same name.
    assert!(l.check("ALICE", v4(5), at(2_500)).is_err());
    let long = format!("{}x", "b".repeat(64));
    fail_n(&l, &long, v4(6), 3_000, 3);
    assert!(
        l.check(&format!("{}y", "B".repeat(64)), v4(7), at(5_500))
            .is_err()
    );
    // Three names from one address: the address waits for a fourth name.
    for (i, u) in ["c1", "c2", "c3"].into_iter().enumerate() {
        fail_n(&l, u, v4(8), 10_000 + i as u64 * 1_000, 1);
    }
    assert!(l.check("c4", v4(8), at(12_500)).is_err());
    // Others are not held up.
    assert_eq!(l.check("dave", v4(9), at(12_500)), Ok(()));
}

#[test]
fn an_ipv6_client_is_its_64_and_a_mapped_ipv4_one_its_address() {
    let l = LoginLimiter::new();
    let host = |segments: [u16; 8]| IpAddr::V6(Ipv6Addr::from(segments));
    let a = host([0x2001, 0xdb8, 0, 0, 0, 0, 0, 1]);
    for (i, u) in ["u1", "u2", "u3"].into_iter().enumerate() {
        fail_n(&l, u, a, i as u64 * 1_000, 1);
    }
    assert!(
        l.check("u4", host([0x2001, 0xdb8, 0, 0, 9, 9, 9, 9]), at(2_500))
            .is_err()
    );
    assert_eq!(
        l.check("u4", host([0x2001, 0xdb8, 0, 1, 0, 0, 0, 1]), at(2_500)),
        Ok(())
    );
    for (i, u) in ["v1", "v2", "v3"].into_iter().enumerate() {
        fail_n(&l, u, v4(1), 10_000 + i as u64 * 1_000, 1);
    }
    let mapped = IpAddr::V6(Ipv4Addr::new(127, 0, 0, 1).to_ipv6_mapped());
    assert!(l.check("v4", mapped, at(12_500)).is_err());
}

#[test]
fn a_success_clears_the_users_and_the_addresss_failures() {
    let l = LoginLimiter::new();
    let t = fail_n(&l, "alice", v4(1), 0, 3);
    assert!(l.check("alice", v4(1), at(t)).is_err());
    assert!(l.check("bob", v4(1), at(t)).is_err());
    l.succeeded("alice", v4(1));
    assert_eq!(l.check("alice", v4(1), at(t)), Ok(()));
    // Counting starts again: one failure is free.
    l.failed("alice", v4(1), at(t));
    assert_eq!(l.check("alice", v4(1), at(t + 1)), Ok(()));
    assert_eq!(l.tracked(), 2);
}

#[test]
fn a_day_without_failures_forgets_them() {
    let l = LoginLimiter::new();
    (0..8).for_each(|_| l.failed("alice", v4(1), T0));
    assert_eq!(l.check("alice", v4(1), T0), Err(secs(32)));
    let t = 0;
    let day = 24 * 3600 * 1_000;
    assert!(l.check("alice", v4(1), at(t + day - 1)).is_ok());
    l.failed("alice", v4(1), at(t + day));
    assert_eq!(l.check("alice", v4(1), at(t + day)), Ok(()));
}

#[test]
fn the_tracked_names_and_addresses_are_bounded_the_oldest_forgotten() {
    let l = LoginLimiter::new();
    let victim = fail_n(&l, "victim", v4(1), 0, 3);
    assert!(l.check("victim", v4(2), at(victim)).is_err());
    // Checks alone track nothing.
    for i in 0..1_000u64 {
        let _ = l.check(&format!("probe{i}"), v4(3), at(10_000 + i * 1_000));
    }
    assert_eq!(l.tracked(), 2);
    for i in 0..MAX_TRACKED as u64 {
        l.failed(&format!("user{i}"), v4(1), at(2_000_000 + i));
    }
    assert_eq!(l.tracked(), MAX_TRACKED);
    let now = at(2_000_000 + MAX_TRACKED as u64);
    assert_eq!(l.check("victim", v4(2), now), Ok(()));
    // The most recent are still held.
    l.failed("user9999", v4(9), now);
    l.failed("user9999", v4(9), now);
    assert!(l.check("user9999", v4(10), now).is_err());
}

#[test]
fn the_session_cookie_is_http_only_secure_strict_and_host_only() {
    let set = session_cookie("abc-_123", secs(43_200));
    assert_eq!(
        set,
        "__Host-dw_session=abc-_123; HttpOnly; Secure; SameSite=Strict; Path=/; Max-Age=43200"
    );
    let cleared = cleared_cookie();
    assert!(cleared.starts_with("__Host-dw_session=;"), "{cleared}");
    assert!(cleared.ends_with("Max-Age=0"), "{cleared}");
    for attr in ["HttpOnly", "Secure", "SameSite=Strict", "Path=/"] {
        assert!(cleared.contains(attr), "{cleared}");
    }
    assert!(!set.contains("Domain") && !cleared.contains("Domain"));
}

#[test]
fn a_cookie_is_found_by_its_exact_name() {
    let h = "theme=dark; __Host-dw_session=tok123;lang=en";
    assert_eq!(cookie_value(h, SESSION_COOKIE), Some("tok123"));
    assert_eq!(cookie_value(h, "lang"), Some("en"));
    assert_eq!(cookie_value("  a = 1 ;  b=2  ", "a"), Some("1"));
    assert_eq!(cookie_value("  a = 1 ;  b=2  ", "b"), Some("2"));
    assert_eq!(cookie_value("x_session=1; session=2", "session"), Some("2"));
    assert_eq!(cookie_value("session_old=1", "session"), None);
    assert_eq!(cookie_value("Session=1", "session"), None);
    assert_eq!(cookie_value("a=\"quoted\"", "a"), Some("quoted"));
    assert_eq!(cookie_value("a=b=c", "a"), Some("b=c"));
    assert_eq!(cookie_value("a=1; a=2", "a"), Some("1"));
    assert_eq!(cookie_value("", "a"), None);
    assert_eq!(cookie_value("novalue; a", "a"), None);
    let set = session_cookie("tok", secs(1));
    let pair = set.split(';').next().unwrap();
    assert_eq!(cookie_value(pair, SESSION_COOKIE), Some("tok"));
}

#[test]
fn a_proxys_header_is_believed_from_the_proxy_only() {
    let users = Users::parse(
        &format!("alice:operator:{}\n", cheap("a long password!")),
        "u",
    )
    .unwrap();
    let proxy = ProxyAuth {
        addresses: vec![v4(10), IpAddr::V6(Ipv6Addr::LOCALHOST)],
        user_header: "X-Remote-User".into(),
        default_role: Role::Viewer,
    };
    assert_eq!(
        proxy.proxy_user(v4(10), Some("alice"), &users),
        Some(("alice".into(), Role::Operator))
    );
    assert_eq!(
        proxy.proxy_user(IpAddr::V6(Ipv6Addr::LOCALHOST), Some(" bob "), &users),
        Some(("bob".into(), Role::Viewer))
    );
    let mapped = IpAddr::V6(Ipv4Addr::new(127, 0, 0, 10).to_ipv6_mapped());
    assert_eq!(
        proxy.proxy_user(mapped, Some("alice"), &users),
        Some(("alice".into(), Role::Operator))
    );
    // Anyone else can send the header: not believed.
    assert_eq!(proxy.proxy_user(v4(11), Some("alice"), &users), None);
    assert_eq!(proxy.proxy_user(v4(10), None, &users), None);
    for bad in ["", "a b", "<script>", &"a".repeat(65), "alice\r\nX: y"] {
        assert_eq!(proxy.proxy_user(v4(10), Some(bad), &users), None, "{bad:?}");
    }
}
