//! `[roce] address`: the port's IP identity, one address per family. A profile writes one
//! address (`"10.77.0.1/24"` or `"fd00:77::1/64"`) or a list of two of different families
//! (`["10.77.0.1/24", "fd00:77::1/64"]`): RoCEv2 runs over either (IBTA vol. 1 annex A17.4),
//! and a connection uses the local address of its peer's family.

use super::cidr::{IpCidr, Ipv4Cidr, Ipv6Cidr};
use super::error::ConfigError;
use crate::cm::LocalIps;
use crate::net::NetConfig;
use crate::wire::ethernet::EthernetAddress;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The port's IPv4 and IPv6 addresses with their prefixes; at least one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PortAddresses {
    pub v4: Option<Ipv4Cidr>,
    pub v6: Option<Ipv6Cidr>,
}

/// `roce.address` as TOML holds it: a string or a list of strings.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(untagged)]
pub(super) enum RawAddresses {
    One(String),
    Many(Vec<String>),
}

impl PortAddresses {
    /// An IPv4 port: `ip` on a `/prefix_len` subnet (1..=31, a host address of it).
    pub fn v4(ip: Ipv4Addr, prefix_len: u8) -> Result<PortAddresses, &'static str> {
        Ok(Ipv4Cidr::new(ip, prefix_len)?.into())
    }

    /// An IPv6 port: `ip` on a `/prefix_len` prefix (global or unique-local unicast).
    pub fn v6(ip: Ipv6Addr, prefix_len: u8) -> Result<PortAddresses, &'static str> {
        Ok(PortAddresses {
            v4: None,
            v6: Some(Ipv6Cidr::new(ip, prefix_len)?),
        })
    }

    /// Adds the IPv6 address of a dual-stack port.
    pub fn with_v6(self, ip: Ipv6Addr, prefix_len: u8) -> Result<PortAddresses, &'static str> {
        Ok(PortAddresses {
            v6: Some(Ipv6Cidr::new(ip, prefix_len)?),
            ..self
        })
    }

    /// Parses the profile's `roce.address`: one address, or one of each family.
    pub(super) fn parse(raw: &RawAddresses) -> Result<PortAddresses, ConfigError> {
        const FIELD: &str = "roce.address";
        let list: Vec<&str> = match raw {
            RawAddresses::One(s) => vec![s.as_str()],
            RawAddresses::Many(v) => v.iter().map(String::as_str).collect(),
        };
        let bad = |value: &str, reason: &'static str| ConfigError::BadCidr {
            field: FIELD,
            value: value.to_string(),
            reason,
        };
        if list.is_empty() {
            return Err(bad(
                "[]",
                "no address: name one (IPv4, IPv6) or one of each",
            ));
        }
        let mut out = PortAddresses { v4: None, v6: None };
        for s in list {
            match IpCidr::parse(s).map_err(|reason| bad(s, reason))? {
                IpCidr::V4(c) if out.v4.is_none() => out.v4 = Some(c),
                IpCidr::V6(c) if out.v6.is_none() => out.v6 = Some(c),
                _ => return Err(bad(s, "a port has at most one address of each family")),
            }
        }
        Ok(out)
    }

    /// The profile form: a string for one address, a list for two.
    pub(super) fn to_raw(self) -> RawAddresses {
        let all: Vec<String> = self.iter().map(|c| c.to_string()).collect();
        match <[String; 1]>::try_from(all) {
            Ok([one]) => RawAddresses::One(one),
            Err(all) => RawAddresses::Many(all),
        }
    }

    /// The addresses, IPv4 first.
    pub fn iter(&self) -> impl Iterator<Item = IpCidr> {
        self.v4
            .map(IpCidr::V4)
            .into_iter()
            .chain(self.v6.map(IpCidr::V6))
    }

    /// The addresses without their prefixes, as the CM speaks for them.
    pub fn ips(&self) -> LocalIps {
        LocalIps {
            v4: self.v4.map(|c| c.addr()),
            v6: self.v6.map(|c| c.addr()),
        }
    }

    /// The neighbour layer's configuration of a port with these addresses and MAC `mac` (the
    /// defaults of `NetConfig::new` otherwise).
    pub fn net_config(&self, mac: EthernetAddress) -> NetConfig {
        match (self.v4, self.v6) {
            (Some(v4), v6) => {
                let net = NetConfig::new(mac, v4.addr(), v4.prefix_len());
                match v6 {
                    Some(v6) => net.with_ipv6(v6.addr(), v6.prefix_len()),
                    None => net,
                }
            }
            (None, Some(v6)) => NetConfig::ipv6_only(mac, v6.addr(), v6.prefix_len()),
            // `parse` and the constructors never leave both out.
            (None, None) => NetConfig::ipv6_only(mac, Ipv6Addr::UNSPECIFIED, 0),
        }
    }

    /// The first address (IPv4 if there is one): the DAT IA address.
    pub fn primary(&self) -> IpAddr {
        self.ips().primary()
    }
}

impl From<Ipv4Cidr> for PortAddresses {
    fn from(c: Ipv4Cidr) -> PortAddresses {
        PortAddresses {
            v4: Some(c),
            v6: None,
        }
    }
}

impl fmt::Display for PortAddresses {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for c in self.iter() {
            if !first {
                f.write_str(", ")?;
            }
            first = false;
            c.fmt(f)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(raw: RawAddresses) -> Result<PortAddresses, String> {
        PortAddresses::parse(&raw).map_err(|e| e.to_string())
    }

    #[test]
    fn one_address_of_either_family_or_one_of_each() {
        let v4 = parse(RawAddresses::One("10.77.0.1/24".into())).unwrap();
        assert_eq!(
            (v4.v4.unwrap().to_string(), v4.v6),
            ("10.77.0.1/24".into(), None)
        );
        let v6 = parse(RawAddresses::One("fd00:77::1/64".into())).unwrap();
        assert_eq!(v6.v4, None);
        assert_eq!(v6.primary(), "fd00:77::1".parse::<IpAddr>().unwrap());
        let both = parse(RawAddresses::Many(vec![
            "fd00:77::1/64".into(),
            "10.77.0.1/24".into(),
        ]))
        .unwrap();
        assert_eq!(both.to_string(), "10.77.0.1/24, fd00:77::1/64");
        assert_eq!(both.primary(), "10.77.0.1".parse::<IpAddr>().unwrap());
        assert!(matches!(both.to_raw(), RawAddresses::Many(v) if v.len() == 2));
        assert!(matches!(v6.to_raw(), RawAddresses::One(s) if s == "fd00:77::1/64"));
    }

    #[test]
    fn the_port_gets_each_family_it_names() {
        let mac = EthernetAddress([2, 0, 0, 0, 0, 1]);
        let one = |s: &str| parse(RawAddresses::One(s.into())).unwrap().net_config(mac);
        let v4 = one("10.77.0.1/24");
        assert_eq!(
            (v4.ipv4.map(|i| i.ip.to_string()), v4.ipv6),
            (Some("10.77.0.1".into()), None)
        );
        let v6 = one("fd00:77::1/64");
        assert_eq!(v6.ipv4, None);
        assert_eq!(
            v6.ipv6.map(|i| (i.ip.to_string(), i.prefix_len)),
            Some(("fd00:77::1".into(), 64))
        );
        let both = parse(RawAddresses::Many(vec![
            "10.77.0.1/24".into(),
            "fd00:77::1/64".into(),
        ]))
        .unwrap()
        .net_config(mac);
        assert!(both.ipv4.is_some() && both.ipv6.is_some());
        assert!(both.validate().is_ok() && v6.validate().is_ok() && v4.validate().is_ok());
    }

    #[test]
    fn two_of_one_family_none_or_a_bad_one_is_refused_by_key() {
        let e = parse(RawAddresses::Many(vec![
            "10.77.0.1/24".into(),
            "10.77.1.1/24".into(),
        ]))
        .unwrap_err();
        assert!(
            e.contains("roce.address") && e.contains("at most one address of each family"),
            "{e}"
        );
        assert!(parse(RawAddresses::Many(vec![]))
            .unwrap_err()
            .contains("no address"));
        let e = parse(RawAddresses::One("fe80::1/64".into())).unwrap_err();
        assert!(e.contains("fe80::1/64"), "{e}");
        let e = parse(RawAddresses::One("fd00:77::1".into())).unwrap_err();
        assert!(e.contains("prefix length"), "{e}");
    }
}
