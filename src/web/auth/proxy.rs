//! A reverse proxy that authenticates users itself: whom it names, and with which role.

use std::net::IpAddr;

use super::{Role, Users, valid_user_name};

/// A reverse proxy that authenticates users itself and names them in a header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyAuth {
    /// The proxy's addresses: only a connection from one of them is believed.
    pub addresses: Vec<IpAddr>,
    /// The header naming the user (`X-Remote-User`, say).
    pub user_header: String,
    /// The role of a user the users file does not list.
    pub default_role: Role,
}

impl ProxyAuth {
    /// The user the proxy vouches for: `None` when the connection is not from the proxy
    /// (anyone can send the header), without the header, or with a value that is no user
    /// name. The users file's role when it lists the name, else `default_role`.
    pub fn proxy_user(
        &self,
        peer: IpAddr,
        header_value: Option<&str>,
        users: &Users,
    ) -> Option<(String, Role)> {
        let peer = peer.to_canonical();
        if !self.addresses.iter().any(|a| a.to_canonical() == peer) {
            return None;
        }
        let name = header_value?.trim();
        if !valid_user_name(name) {
            return None;
        }
        let role = users.role_of(name).unwrap_or(self.default_role);
        Some((name.to_string(), role))
    }
}
