//! `cargo bench --bench validator`: what one observation of a KeyTrap world costs us
//! (KeyTrap). Every child address answers its DNSKEY with 300 copies of the key
//! and 300 garbage RRSIGs carrying its tag before the valid one, and its SOA with 450
//! garbage RRSIGs (CVE-2023-50387's shape). One look as the engine makes it at a zone in
//! `ds_observed` (the validated parent view, the child view, the validation probe), at 2
//! and at 3 child addresses, with the signature cache cold; printed: CPU seconds of this
//! process, signature checks made, and the verdicts. The floor beside it: the same look at
//! the well-behaved world. Prints figures, asserts nothing.

use std::time::Instant;

use dnssec_warden::dns::validator::signature_checks_made;
use dnssec_warden::dns::{DnsObserver, Observer};
use dnssec_warden_test_support::scripted_dns::{
    Behaviour, ELSEWHERE, ELSEWHERE_HOST, ScriptedDns, Servers, ZONE,
};
use hickory_proto::rr::RecordType;

/// This process's user and system CPU time, in seconds (`/proc/self/stat`).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command name (which may hold spaces) start after ") ".
    let rest = stat.rsplit_once(") ").map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15 of stat(5), 11 and 12 after the state field.
    (ticks(11) + ticks(12)) / 100.0
}

async fn look(dns: &ScriptedDns, label: &str) {
    // A fresh observer: no cached cut, keys or signatures of an earlier look.
    let observer = DnsObserver::new(&dns.settings()).expect("observer");
    let (cpu, checks, wall) = (cpu_seconds(), signature_checks_made(), Instant::now());
    let (parent, child, probes) = futures::join!(
        observer.parent_validated(ZONE),
        observer.child(ZONE),
        observer.validation(ZONE)
    );
    let cpu = cpu_seconds() - cpu;
    let checks = signature_checks_made() - checks;
    let addresses = child.as_ref().map_or(0, |c| c.answers.len());
    let child_verdicts: Vec<String> = child
        .as_ref()
        .map(|c| {
            c.answers
                .iter()
                .map(|a| match &a.answer {
                    dnssec_warden::dns::DnskeyAnswer::Keys(_) => "keys".to_string(),
                    dnssec_warden::dns::DnskeyAnswer::Absent => "absent".to_string(),
                    dnssec_warden::dns::DnskeyAnswer::Unknown(r) => format!("unknown ({r})"),
                })
                .collect()
        })
        .unwrap_or_default();
    println!(
        "{label}: {addresses} child addresses, CPU {cpu:.3} s, {checks} signature checks, wall {:.3} s; parent view {}, validation {} ({}); child answers: {}",
        wall.elapsed().as_secs_f64(),
        if parent.is_ok() { "ok" } else { "failed" },
        probes[0].verdict,
        probes[0].detail,
        child_verdicts.join("; ")
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let dns = ScriptedDns::start().await;
        look(&dns, "floor (well-behaved world)").await;
        let trap = Behaviour::KeyTrap {
            copies: 300,
            garbage: 300,
        };
        dns.script(Servers::Child, Some(RecordType::DNSKEY), trap);
        dns.script(
            Servers::Child,
            Some(RecordType::SOA),
            Behaviour::KeyTrap {
                copies: 1,
                garbage: 450,
            },
        );
        look(&dns, "KeyTrap").await;
        for qtype in [RecordType::DNSKEY, RecordType::SOA] {
            let garbage = if qtype == RecordType::SOA { 450 } else { 300 };
            let copies = if qtype == RecordType::SOA { 1 } else { 300 };
            dns.script(
                Servers::One(ELSEWHERE),
                Some(qtype),
                Behaviour::KeyTrap { copies, garbage },
            );
        }
        dns.set_child_ns(&["ns1.child.test.", "ns2.child.test.", ELSEWHERE_HOST]);
        look(&dns, "KeyTrap").await;
    });
}
