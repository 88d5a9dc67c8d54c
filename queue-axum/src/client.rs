//! Who a request's client is, for the caps each client is held to (connections, live
//! streams, new idempotency keys, wrong credentials): its address, as axum's
//! `ConnectInfo` gives it. [`serve`](crate::serve) puts it on every request; behind a
//! reverse proxy, a middleware of the application's that puts the client's own address
//! there (from the header its proxy sets) makes every such cap per client again.
//!
//! An IPv6 client counts by its /64: one host holds a whole /64 as a matter of course,
//! and would otherwise pass every cap by changing its address.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use axum::extract::ConnectInfo;
use axum::http::request::Parts;

/// The client of `request` as the caps count it; `None` when the server did not say.
pub(crate) fn of(request: &Parts) -> Option<IpAddr> {
    request
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(peer)| counted(peer.ip()))
}

/// `ip` as the caps count it: IPv4 as it is (an IPv4-mapped IPv6 address too), IPv6 by
/// its /64.
pub(crate) fn counted(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let bits = u128::from(v6) & (u128::MAX << 64);
                IpAddr::V6(Ipv6Addr::from(bits))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ipv6_client_counts_by_its_64_and_a_mapped_ipv4_as_ipv4() {
        let a: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let other: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(counted(a), counted(b));
        assert_ne!(counted(a), counted(other));
        let mapped: IpAddr = "::ffff:10.0.0.7".parse().unwrap();
        assert_eq!(counted(mapped), IpAddr::from([10, 0, 0, 7]));
        assert_eq!(
            counted(IpAddr::from([10, 0, 0, 7])),
            IpAddr::from([10, 0, 0, 7])
        );
    }
}
