//! `cargo bench --bench facts`: reading and writing a zone's facts (`zones.facts`), which
//! every step does once each and every `status` or console row reads: the stored JSON of
//! a zone in `disabled`, of a settled `active` zone (with its DS path), and of every fact
//! set but the DS path and a signed move. Printed: the median of 9 rounds, in
//! nanoseconds per read and per write. Asserts nothing about time.

use std::hint::black_box;
use std::time::Instant;

use dnssec_warden::lifecycle::Facts;

const DISABLED: &str = r#"{"provider_ns":["ns1.provider.test.","ns2.provider.test."],"delegation":"provider","seen_at_provider":true,"settled_view":{"parent_ds":"none","child_keys":"none"}}"#;

const ACTIVE: &str = concat!(
    r#"{"ds_line":"z000001.test. 3600 IN DS 12345 13 2 ABABABABABABABABABABABABABABABABABABABABABABABABABABABABABABABAB","#,
    r#""ds_to_enter":"z000001.test. 3600 IN DS 12345 13 2 ABABABABABABABABABABABABABABABABABABABABABABABABABABABABABABABAB","#,
    r#""dnskey_to_enter":"z000001.test. 3600 IN DNSKEY 257 3 13 mdsswUyr3DPW132mOi8V9xESWE8jTo0dxCjjnopKl+GqJxpVXckHAeF+KkxLbxILfDLUT0rAK9iUzy1L53eKGQ==","#,
    r#""dnskey_everywhere_at":1764000000000,"hold_until":1764003600000,"ds_announced_at":1764003600000,"#,
    r#""ds_first_seen_at":1764090000000,"max_ds_ttl":3600,"max_dnskey_ttl":3600,"ds_seen_at":1764400000000,"#,
    r#""provider_ns":["ns1.provider.test.","ns2.provider.test."],"delegation":"provider","seen_at_provider":true,"#,
    r#""served_keys_when_asked":"257/13/12345","#,
    r#""settled_view":{"parent_ds":"12345/13/2/ABAB","child_keys":"257/13/12345"},"#,
    r#""ds_path":{"parent":"test.","path":{"kind":"registrar"},"reason":{"kind":"default"},"scan_period":null,"accepts_first_ds":false,"first_ds_after":null,"signal":"CDS","call_registrar_hook":true,"note":null},"#,
    r#""ds_path_at":1764400000000}"#
);

const EVERY: &str = concat!(
    r#"{"ds_line":"DS A","ds_to_enter":"DS B","dnskey_to_enter":"DNSKEY A","provider_off_since":1,"#,
    r#""dnskey_everywhere_at":2,"hold_until":3,"ds_announced_at":4,"ds_first_seen_at":5,"t_gone":6,"#,
    r#""gone_confirmed_at":7,"max_ds_ttl":8,"max_dnskey_ttl":9,"ds_seen_at":10,"partial_since":11,"#,
    r#""failing_since":12,"failures":13,"provider_ns":["ns1.","ns2."],"delegation":"mixed","#,
    r#""seen_at_provider":true,"old_ns":["old."],"old_ns_ttl":14,"delegated_at":15,"elsewhere_seen":true,"#,
    r#""moving_in":true,"ds_to_remove":["DS C"],"delegation_requested":true,"#,
    r#""served_keys_when_asked":"257/13/1","held_by":{"what":"the provider","on":"provider","account":"a"},"#,
    r#""held_since":16,"settled_view":{"parent_ds":"ds","child_keys":"keys"},"ds_path_at":17,"#,
    r#""registry_since":18,"registry_missed_at":19,"#,
    r#""cds_notified":{"at":20,"target":"scanner.ch.","addr":"127.0.0.9","port":53,"signal":"delete","acknowledged":true,"outcome":"acknowledged"}}"#
);

const ROUNDS: usize = 9;
const PER_ROUND: u32 = 200_000;

/// The median over the rounds of the time `f` takes, in nanoseconds.
fn median_ns(mut f: impl FnMut()) -> f64 {
    let mut rounds: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let started = Instant::now();
            for _ in 0..PER_ROUND {
                f();
            }
            started.elapsed().as_nanos() as f64 / f64::from(PER_ROUND)
        })
        .collect();
    rounds.sort_by(f64::total_cmp);
    rounds[ROUNDS / 2]
}

fn main() {
    let mut line = String::from("facts");
    for (name, text) in [("disabled", DISABLED), ("active", ACTIVE), ("every", EVERY)] {
        let facts: Facts = match serde_json::from_str(text) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("facts bench: {name}: {e}");
                std::process::exit(1);
            }
        };
        let read = median_ns(|| {
            black_box(serde_json::from_str::<Facts>(black_box(text)).ok());
        });
        let write = median_ns(|| {
            black_box(serde_json::to_string(black_box(&facts)).ok());
        });
        println!("facts {name}: read {read:.0} ns, write {write:.0} ns");
        line.push_str(&format!(
            " {name}_read_ns={read:.0} {name}_write_ns={write:.0}"
        ));
    }
    println!("{line}");
}
