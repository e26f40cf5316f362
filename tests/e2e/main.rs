//! End to end: `dnssec-warden run` (the real binary) over real DNS software (Knot,
//! Unbound, PowerDNS, each world on a 127.0.B.x block of its own, test-support/src/world.rs)
//! or the lab (provider simulator, lab DNS, a port of its own per world): lifecycles,
//! moves, signed moves, the registry's parent loop, faults, reloads, sinks, several
//! daemons on one PostgreSQL database.
//!
//! One binary of a handful (tests/run.sh), its files' tests beside each other on the
//! default threads (one a core: more at once delay the looks of the Knot worlds, whose
//! `poll_waiting` of 300 ms makes a look later than 600 ms restart the TTL wait). The
//! blocks, one per test, never two files on one: e2e_knot 62-64, e2e_move 65-67, e2e_powerdns 68-70,
//! e2e_registry 77-78, e2e_signed_move 91-94, e2e_rollover 96-102 and 105-106 (registry_lab, in tests/dns, 73-76;
//! move_look, in tests/providers, 90; the benchmarks run alone).

mod cloudflare_e2e;
mod e2e_knot;
mod e2e_move;
mod e2e_powerdns;
mod e2e_registry;
mod e2e_rollover;
mod e2e_signed_move;
mod faults_e2e;
mod ha_chaos;
mod ha_fencing;
mod lifecycle_e2e;
mod reload_e2e;
mod route53_e2e;
mod sinks_e2e;
