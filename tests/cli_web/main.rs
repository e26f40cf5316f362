//! The commands and the files we ship, through the real binary (exit codes, zone-name and
//! path rules, every shipped configuration, the demo, the systemd unit, the Prometheus
//! rules), the layering of the source, and the web console (its security rules over real
//! HTTP, a real browser).
//!
//! One binary of a handful (tests/run.sh); each test has its own temporary directory, its
//! own daemon or console on a port of its own, its own chromedriver.

mod browser_harness;
mod cli_rules;
mod config_files;
mod demo;
mod demo_console;
mod layers;
mod prometheus_rules;
mod status_filters;
mod systemd_unit;
mod web_browser;
mod web_security;
mod web_zone_page;
