//! The provider clients: the Gcore client against the provider simulator (and behind the
//! fault proxy), the Cloudflare and Route 53 clients against their simulators (and behind
//! the proxy; their bodies held to the providers' published definitions in conformance),
//! the PowerDNS client against a real PowerDNS, a signed move's look and the `move`
//! command against two real PowerDNS servers.
//!
//! One binary of a handful (tests/run.sh). Each PowerDNS and simulator listens on a port
//! of its own; move_look's Knot servers are on 127.0.90.x, no other file's block.

mod cloudflare;
mod conformance;
mod move_cli;
mod move_look;
mod powerdns;
mod provider;
mod route53;
