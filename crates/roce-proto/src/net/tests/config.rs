//! Configuration validation.

use super::*;

#[test]
fn defaults_validate() {
    let c = NetConfig::new(OUR_MAC, OUR_IP, 24);
    assert_eq!(c.validate(), Ok(()));
    let v4 = c.ipv4.unwrap();
    assert_eq!(v4.netmask(), Ipv4Addr::new(255, 255, 255, 0));
    assert_eq!(v4.subnet_broadcast(), Some(Ipv4Addr::new(192, 168, 2, 255)));
    assert!(c.on_link(LINUX_IP));
    assert!(!c.on_link(Ipv4Addr::new(192, 168, 3, 1)));
}

#[test]
fn bad_values_are_rejected() {
    let base = NetConfig::new(OUR_MAC, OUR_IP, 24);
    let with = |f: &dyn Fn(&mut NetConfig)| {
        let mut c = base;
        f(&mut c);
        Net::new(c).err()
    };
    // An edit of the IPv4 address and prefix.
    fn v4(f: fn(&mut Ipv4Identity)) -> impl Fn(&mut NetConfig) {
        move |c| {
            if let Some(v4) = c.ipv4.as_mut() {
                f(v4)
            }
        }
    }
    assert_eq!(
        with(&|c| c.mac = EthernetAddress::BROADCAST),
        Some(ConfigError::MacNotUnicast(EthernetAddress::BROADCAST))
    );
    assert_eq!(
        with(&|c| c.mac = EthernetAddress([0; 6])),
        Some(ConfigError::MacNotUnicast(EthernetAddress([0; 6])))
    );
    assert_eq!(
        with(&v4(|a| a.prefix_len = 0)),
        Some(ConfigError::PrefixLen(0))
    );
    assert_eq!(
        with(&v4(|a| a.prefix_len = 32)),
        Some(ConfigError::PrefixLen(32))
    );
    assert_eq!(
        with(&v4(|a| a.ip = Ipv4Addr::new(127, 0, 0, 1))),
        Some(ConfigError::IpNotUnicast(Ipv4Addr::new(127, 0, 0, 1)))
    );
    assert_eq!(
        with(&v4(|a| a.ip = Ipv4Addr::new(192, 168, 2, 255))),
        Some(ConfigError::IpNotHost {
            ip: Ipv4Addr::new(192, 168, 2, 255),
            prefix_len: 24
        })
    );
    assert_eq!(
        with(&v4(|a| a.ip = Ipv4Addr::new(192, 168, 2, 0))),
        Some(ConfigError::IpNotHost {
            ip: Ipv4Addr::new(192, 168, 2, 0),
            prefix_len: 24
        })
    );
    assert_eq!(with(&|c| c.mtu = 575), Some(ConfigError::Mtu(575)));
    assert_eq!(with(&|c| c.mtu = 9217), Some(ConfigError::Mtu(9217)));
    assert_eq!(with(&|c| c.dscp = 64), Some(ConfigError::Dscp(64)));
    assert_eq!(with(&|c| c.ecn = 3), Some(ConfigError::Ecn(3)));
    assert_eq!(with(&|c| c.ttl = 0), Some(ConfigError::Ttl));
    assert_eq!(
        with(&|c| c.arp_retry_interval = Duration::ZERO),
        Some(ConfigError::ZeroDuration("arp_retry_interval"))
    );
    assert_eq!(
        with(&|c| c.arp_cache_ttl = Duration::ZERO),
        Some(ConfigError::ZeroDuration("arp_cache_ttl"))
    );
    assert_eq!(
        with(&|c| c.arp_cache_capacity = 0),
        Some(ConfigError::ZeroCapacity("arp_cache_capacity"))
    );
    assert_eq!(
        with(&|c| c.tx_queue_capacity = 0),
        Some(ConfigError::ZeroCapacity("tx_queue_capacity"))
    );
    assert!(ConfigError::Ecn(3).to_string().contains("CE"));
    assert_eq!(with(&|c| c.ipv4 = None), Some(ConfigError::NoAddress));
}

#[test]
fn point_to_point_subnet() {
    // /31 (RFC 3021): both addresses are hosts, there is no broadcast.
    let mut c = NetConfig::new(OUR_MAC, Ipv4Addr::new(10, 0, 0, 0), 31);
    assert_eq!(c.validate(), Ok(()));
    assert_eq!(c.ipv4.unwrap().subnet_broadcast(), None);
    c = NetConfig::new(OUR_MAC, Ipv4Addr::new(10, 0, 0, 1), 31);
    let mut net = Net::new(c).unwrap();
    assert_eq!(
        net.resolve(ms(0), Ipv4Addr::new(10, 0, 0, 0).into()),
        Resolve::Pending
    );
}

#[test]
fn path_mtu_fits_the_link() {
    let mut c = NetConfig::new(OUR_MAC, OUR_IP, 24);
    for (mtu, path) in [
        (576, 512),
        (1500, 1024),
        (2200, 2048),
        (4200, 4096),
        (9000, 4096),
    ] {
        c.mtu = mtu;
        assert_eq!(c.path_mtu(), path, "MTU {mtu}");
    }
}
