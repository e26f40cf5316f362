//! The harness dnssec-warden's integration tests and benchmarks share (as hickory-dns has
//! its `test-support` crate): one home for it, compiled once, instead of files included
//! into every test binary by `#[path]`. A harness used by one test only stays that test's.
//!
//! | module | what |
//! |---|---|
//! | [`postgres`] | a throwaway PostgreSQL cluster, stopped by PID; the only module the library's own unit tests use, so it names no `dnssec-warden` type (Cargo.toml) |
//! | [`daemon`] | the real binary: a daemon child process stopped by PID, one-shot CLI calls, a lab world (provider simulator, lab DNS) with its configuration |
//! | [`fault_proxy`] | a fault-injecting HTTP reverse proxy in front of the provider simulator |
//! | [`ha`] | several daemons on one PostgreSQL database over the lab world, the registrar a webhook receiver |
//! | [`knot`] | Knot DNS and Unbound processes on loopback, each stopped by PID |
//! | [`logs`] | what the code under test logs on one thread, while the tests of a binary run together |
//! | [`world`] | a whole real-world DNS on Knot and Unbound for one end-to-end test |
//! | [`chain`] | a caching Unbound that does not validate behind a validating one that forgets: every answer validated afresh from what a cache holds, for the key rollovers |
//! | [`decisions`] | the engine's decisions about a zone as canonical text, step by step, from the store's rows (the decisions' golden replay) |
//! | [`fake`] | a scripted provider and DNS for the engine tests, on a manual clock, checking the safety invariants against the ground truth |
//! | [`move_world`] | a signed move's world for the engine tests: two accounts of one zone, their child servers and the parent's, each lagging on its own, a registrar the test drives, and rule 15's oracle over what every address served |
//! | [`rig`] | the engine tests' set-up on the fake world: SQLite in memory or a PostgreSQL database of its own ([`on_both_backends!`]) |
//! | [`bench_world`] | the benchmarks' world: a Knot DNS TLD over thousands of delegations to the lab's servers, and a benchmark's `main` |
//! | [`browser`] | headless Debian chromium over WebDriver (chromedriver stopped with its chromium by PGID), the clipboard read back, screenshots under `target/screenshots/` read by OCR |
//! | [`scripted_dns`] | a scripted, signed authoritative world on loopback: per-server behaviours as data |

pub mod bench_world;
pub mod browser;
pub mod chain;
pub mod daemon;
pub mod decisions;
pub mod dns_limiter;
pub mod fake;
pub mod fault_proxy;
pub mod ha;
pub mod knot;
pub mod logs;
pub mod move_world;
pub mod pdns;
pub mod postgres;
pub mod rig;
pub mod scripted_dns;
pub mod webdriver;
pub mod world;
