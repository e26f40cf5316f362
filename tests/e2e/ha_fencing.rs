//! A daemon paused past its lease never commits or performs anything with its stale
//! epoch (DESIGN.md rule 12), through real processes on one PostgreSQL database: daemon A
//! stops itself (SIGSTOP, the test hook `DNSSEC_WARDEN_TEST_STOP_AT`) at an exact point of
//! the step that switches DNSSEC on; its lease runs out; daemon B takes the zone one epoch
//! up and acts; then A is continued. Checked against the provider simulator's call log
//! (the switch sent exactly once) and the audit trail (nothing of A's after B took over,
//! epochs never backwards). One test per point: before the commit, after the commit with
//! the call pending, after the call with its outcome unrecorded.

use std::time::{Duration, Instant};

use dnssec_warden::lifecycle::Intent;
use dnssec_warden_test_support::ha::{HaWorld, proc_state};
use sqlx::Row;

const LEASE: Duration = Duration::from_secs(2);

async fn wait_for(what: &str, within: Duration, world: &HaWorld, mut done: impl FnMut() -> bool) {
    let until = Instant::now() + within;
    while !done() {
        assert!(
            Instant::now() < until,
            "{what}: not within {within:?}\n{}",
            world.logs(40)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// (holder, epoch) of the zone's lease as the database has it.
async fn lease(db: &sqlx::PgPool, zone: &str) -> (Option<String>, i64) {
    let row = sqlx::query("SELECT lease_holder, lease_epoch FROM zones WHERE name = $1")
        .bind(zone)
        .fetch_optional(db)
        .await
        .unwrap();
    row.map(|r| (r.get(0), r.get(1))).unwrap_or((None, 0))
}

async fn paused_daemon_is_fenced(point: &str) {
    let mut world = HaWorld::start(1, LEASE, Duration::from_secs(3)).await;
    let zone = world.zones[0].clone();
    let db = world.db().await;
    // A first daemon adopts the zone (DNSSEC off) and stops cleanly, handing it back; then
    // the operator enables it, so that A's first step is the one that switches it on.
    let first = world.start_daemon(&[]);
    world
        .converge(&db, Duration::from_secs(30), |_| "disabled")
        .await
        .unwrap_or_else(|off| panic!("not adopted: {off:?}\n{}", world.logs(40)));
    world.daemons[first].signal("TERM");
    assert!(
        world.daemons[first]
            .wait_exit(Duration::from_secs(20))
            .is_some_and(|s| s.success()),
        "{}",
        world.logs(40)
    );
    world
        .intend(std::slice::from_ref(&zone), Intent::Enabled)
        .await;

    let a = world.start_daemon(&[("DNSSEC_WARDEN_TEST_STOP_AT", format!("{point}:{zone}"))]);
    let a_pid = world.daemons[a].child.id();
    wait_for(
        "A stops itself at the point",
        Duration::from_secs(30),
        &world,
        || proc_state(a_pid) == Some('T'),
    )
    .await;
    let (a_holder, a_epoch) = lease(&db, &zone).await;
    let a_holder = a_holder.expect("A held the zone when it stopped");
    assert!(a_holder.ends_with(&format!("/{a_pid}")), "{a_holder}");
    let on_before = world.switches().get(&zone).map_or(0, |s| s.0.len());
    assert_eq!(
        on_before,
        usize::from(point == "effect_performed"),
        "at {point}, the switch was {}sent",
        if point == "effect_performed" {
            ""
        } else {
            "not yet "
        }
    );

    // B joins; A's lease runs out; B takes the zone one epoch up. The provider answers
    // slowly from now on, so that B's first step is still in flight when A continues:
    // A's stale commit or call would then find the zone's row unchanged (no version
    // conflict to stop it, no effect B already performed), and only the fence refuses it.
    world.sim.handle().set_latency(Duration::from_millis(1500));
    let b = world.start_daemon(&[]);
    let b_pid = world.daemons[b].child.id();
    let mut b_lease = (None, 0);
    let until = Instant::now() + Duration::from_secs(30);
    while !b_lease
        .0
        .as_deref()
        .is_some_and(|h: &str| h.ends_with(&format!("/{b_pid}")))
    {
        assert!(
            Instant::now() < until,
            "B never took the zone\n{}",
            world.logs(40)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
        b_lease = lease(&db, &zone).await;
    }
    assert!(
        b_lease.1 > a_epoch,
        "a taker's epoch is higher: {b_lease:?} after {a_epoch}"
    );
    assert_eq!(proc_state(a_pid), Some('T'), "A is still stopped");
    // A cannot have written since it stopped: every later row of A's is a stale write.
    let last_event_before: i64 = sqlx::query_scalar("SELECT coalesce(max(id), 0) FROM events")
        .fetch_one(&db)
        .await
        .unwrap();
    let resumed_at = dnssec_warden::lifecycle::Clock::now(&dnssec_warden::lifecycle::SystemClock);

    // A continues with whatever it had in hand, while B's step waits for the provider.
    // The log's length before SIGCONT: what A says at once on waking belongs to "after".
    let a_log_at_cont = world.daemons[a].log().len();
    world.daemons[a].signal("CONT");
    world
        .converge(&db, Duration::from_secs(60), |_| "active")
        .await
        .unwrap_or_else(|off| panic!("the zone did not go active: {off:?}\n{}", world.logs(60)));
    tokio::time::sleep(LEASE).await;
    assert!(world.daemons[a].alive(), "A carries on: {}", world.logs(40));

    let switches = world.switches();
    let (on, off) = switches.get(&zone).cloned().unwrap_or_default();
    assert_eq!(
        on.len(),
        1,
        "DNSSEC switched on once, not {}\n{}",
        on.len(),
        world.logs(60)
    );
    assert!(off.is_empty(), "never switched off: {off:?}");
    let late: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM events WHERE zone = $1 AND id > $2 AND holder LIKE $3",
    )
    .bind(&zone)
    .bind(last_event_before)
    .bind(format!("%/{a_pid}"))
    .fetch_one(&db)
    .await
    .unwrap();
    assert_eq!(late, 0, "A wrote after B took the zone\n{}", world.logs(60));
    // Nothing begun by A once it continued (the performer stamps the row it claims).
    let late_effects: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM outbox WHERE zone = $1 AND holder LIKE $2 AND started_at >= $3",
    )
    .bind(&zone)
    .bind(format!("%/{a_pid}"))
    .bind(resumed_at.0)
    .fetch_one(&db)
    .await
    .unwrap();
    assert_eq!(late_effects, 0, "A began an effect after B took the zone");
    let writers = world.writers(&db).await;
    let epochs: Vec<i64> = writers[&zone].iter().filter_map(|w| w.1).collect();
    assert!(
        epochs.windows(2).all(|w| w[0] <= w[1]),
        "epochs went backwards in the audit trail: {epochs:?}"
    );
    if point != "observed" {
        assert!(
            writers[&zone]
                .iter()
                .any(|w| w.0.as_deref() == Some(a_holder.as_str())),
            "A's commit before the stop is in the trail: {:?}",
            writers[&zone]
        );
    }
    // A says what its fence refused, so that an operator sees it: one warning naming the
    // zone, its stale epoch and what was refused (at "observed", the step's write; at
    // "committed", the provider call; at "effect_performed", recording the call's outcome).
    let said = &world.daemons[a].log()[a_log_at_cont..];
    let what = match point {
        "observed" => "step",
        "committed" => "provider_call",
        _ => "effect",
    };
    let fenced: Vec<&str> = said.lines().filter(|l| l.contains("fenced:")).collect();
    assert!(
        fenced.iter().any(|l| l.contains(" WARN ")
            && l.contains(&format!("zone=\"{zone}\""))
            && l.contains(&format!("epoch={a_epoch}"))
            && l.contains(&format!("what=\"{what}\""))),
        "A's log after SIGCONT does not say the fence refused its {what}:\n{said}"
    );
    let (holder, _) = lease(&db, &zone).await;
    assert!(
        holder
            .as_deref()
            .is_some_and(|h| h.ends_with(&format!("/{b_pid}"))),
        "B still holds the zone: {holder:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_before_its_commit() {
    paused_daemon_is_fenced("observed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_after_its_commit_with_the_call_pending() {
    paused_daemon_is_fenced("committed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_after_the_call_before_its_outcome_is_recorded() {
    paused_daemon_is_fenced("effect_performed").await;
}
