//! DAT_QOS (dat.h; the `qos` EP attribute of dat_ep_create(3DAT) and dat_ep_modify(3DAT), the
//! `qos` argument of dat_ep_connect(3DAT) and dat_ep_dup_connect(3DAT)): the service class of
//! an EP's connection. The provider carries it as the DSCP of the EP's packets, in the
//! classes of RFC 4594, and with it the 802.1Q priority of a port whose PCP follows the DSCP
//! (`net::vlan`). Best effort is the port's own DSCP (`[roce] dscp`).

/// One DAT_QOS value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Qos {
    /// DAT_QOS_BEST_EFFORT: the port's DSCP.
    #[default]
    BestEffort,
    /// DAT_QOS_HIGH_THROUGHPUT: AF11 (DSCP 10), RFC 4594's high-throughput data.
    HighThroughput,
    /// DAT_QOS_LOW_LATENCY: EF (DSCP 46), RFC 3246.
    LowLatency,
    /// DAT_QOS_ECONOMY: CS1 (DSCP 8), RFC 4594's low-priority data.
    Economy,
    /// DAT_QOS_PREMIUM: AF41 (DSCP 34).
    Premium,
}

impl Qos {
    /// Every class: the IA's `dat_qos_supported`.
    pub const SUPPORTED: u32 = 0x0f;

    /// The class of a DAT_QOS value; `None` for anything but one of the five values.
    pub fn from_dat(v: u32) -> Option<Qos> {
        Some(match v {
            0x00 => Qos::BestEffort,
            0x01 => Qos::HighThroughput,
            0x02 => Qos::LowLatency,
            0x04 => Qos::Economy,
            0x08 => Qos::Premium,
            _ => return None,
        })
    }

    /// The DAT_QOS value.
    pub fn to_dat(self) -> u32 {
        match self {
            Qos::BestEffort => 0x00,
            Qos::HighThroughput => 0x01,
            Qos::LowLatency => 0x02,
            Qos::Economy => 0x04,
            Qos::Premium => 0x08,
        }
    }

    /// The DSCP of the class's packets; `None`: the port's.
    pub fn dscp(self) -> Option<u8> {
        match self {
            Qos::BestEffort => None,
            Qos::HighThroughput => Some(10),
            Qos::LowLatency => Some(46),
            Qos::Economy => Some(8),
            Qos::Premium => Some(34),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_five_values_round_trip_and_nothing_else_is_a_class() {
        for v in [0u32, 1, 2, 4, 8] {
            assert_eq!(Qos::from_dat(v).map(Qos::to_dat), Some(v));
        }
        for v in [3u32, 5, 0x10, 0x0f, u32::MAX] {
            assert_eq!(Qos::from_dat(v), None, "{v:#x}");
        }
        assert_eq!(Qos::from_dat(2).and_then(Qos::dscp), Some(46));
    }
}
