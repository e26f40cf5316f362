//! dnssec-warden: switches DNSSEC on and off at a managed DNS provider in the order that
//! never takes a domain down. See `ARCHITECTURE.md` for the map of the modules.

pub mod alert;
pub mod alert_kind;
pub mod cli;
pub mod condition;
pub mod config;
pub mod de;
pub mod dns;
pub mod dnssec;
pub mod engine;
pub mod intent;
pub mod lifecycle;
pub mod logging;
pub mod metrics;
pub mod provider;
pub mod retry;
pub mod secret;
pub mod store;
pub mod systemd;
pub mod time;
pub mod web;
pub mod zone_name;
