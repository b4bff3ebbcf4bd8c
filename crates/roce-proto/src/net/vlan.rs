//! IEEE 802.1Q tags, added and removed at the port (as a NIC's VLAN insert and strip offloads
//! do): the stack above builds and parses untagged frames, the port tags what it sends and
//! takes the tag off what it accepts.
//!
//! - Sending: a 4-byte tag after the source MAC, TPID 0x8100, TCI = PCP (3 bits), DEI 0, VID
//!   (12 bits). The PCP is the profile's, or follows the frame's DSCP (`DSCP >> 3`, the
//!   "trust DSCP" mapping of RoCE fabrics: DSCP 26 is priority 3), so an EP's DSCP also picks
//!   its priority. A port with a PCP and no VLAN sends priority-tagged frames (VID 0,
//!   802.1Q-2018 clause 9.6).
//! - Receiving: a port on VLAN `v` accepts frames tagged `v` (any PCP); a port on no VLAN
//!   accepts untagged and priority-tagged frames. Everything else (another VID, untagged frames
//!   on a VLAN port, stacked 802.1ad tags) is another network's: dropped and counted.

use crate::wire::ethernet::{self, EtherType};

/// Length of an 802.1Q tag.
pub const TAG_LEN: usize = 4;

/// Largest VLAN ID (4095 is reserved, 802.1Q table 9-2).
pub const MAX_VLAN_ID: u16 = 4094;

/// Where the priority of a sent frame comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pcp {
    /// The same priority (0..=7) for every frame.
    Fixed(u8),
    /// The frame's DSCP >> 3 for IPv4 frames, 0 for others (ARP).
    FromDscp,
}

/// The 802.1Q identity of a port: its VLAN (0: none, priority tags only) and priorities.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vlan {
    id: u16,
    pcp: Pcp,
}

/// What the port does with a received frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Received {
    /// Untagged and ours: up the stack as it is.
    Untagged,
    /// Tagged and ours: up the stack without its tag.
    Tagged,
    /// Another VLAN's (or stacked tags): dropped and counted.
    Foreign,
}

/// A VLAN ID or PCP out of range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum VlanError {
    #[error("VLAN ID {0} is not in 1..={MAX_VLAN_ID}")]
    Id(u16),
    #[error("PCP {0} is not in 0..=7")]
    Pcp(u8),
}

impl Vlan {
    /// A port on VLAN `id` (1..=4094; `None`: no VLAN, priority tags) with priorities `pcp`.
    pub fn new(id: Option<u16>, pcp: Pcp) -> Result<Vlan, VlanError> {
        match id {
            Some(v) if v == 0 || v > MAX_VLAN_ID => return Err(VlanError::Id(v)),
            _ => {}
        }
        if let Pcp::Fixed(p) = pcp {
            if p > 7 {
                return Err(VlanError::Pcp(p));
            }
        }
        Ok(Vlan {
            id: id.unwrap_or(0),
            pcp,
        })
    }

    /// The VLAN ID; `None` for a port that sends priority-tagged frames only.
    pub fn id(&self) -> Option<u16> {
        (self.id != 0).then_some(self.id)
    }

    /// Where the priority of sent frames comes from.
    pub fn pcp(&self) -> Pcp {
        self.pcp
    }

    /// The tag control information for sending `frame` (untagged): PCP and VID.
    pub fn tci(&self, frame: &[u8]) -> u16 {
        let pcp = match self.pcp {
            Pcp::Fixed(p) => p,
            Pcp::FromDscp => dscp_of(frame).map_or(0, |d| d >> 3),
        };
        (u16::from(pcp) << 13) | self.id
    }

    /// Tags in place a frame built `TAG_LEN` bytes into `buf` (the untagged frame is
    /// `buf[TAG_LEN..]`): its MACs move to the front and our tag goes after them. `false`
    /// (nothing changed) when the frame is shorter than an Ethernet header.
    pub fn tag_in_place(&self, buf: &mut [u8]) -> bool {
        const MACS: usize = ethernet::field::ETHERTYPE;
        if buf.len() < TAG_LEN + ethernet::HEADER_LEN {
            return false;
        }
        let tci = self.tci(&buf[TAG_LEN..]);
        buf.copy_within(TAG_LEN..TAG_LEN + MACS, 0);
        buf[MACS..MACS + 2].copy_from_slice(&EtherType::VLAN.0.to_be_bytes());
        buf[MACS + 2..MACS + 4].copy_from_slice(&tci.to_be_bytes());
        true
    }

    /// Writes untagged `frame` into `out` with our tag after its source MAC. `out` must hold
    /// `frame.len() + TAG_LEN` bytes; `false` (nothing written) when it does not or `frame` is
    /// shorter than an Ethernet header.
    pub fn write_tagged(&self, frame: &[u8], out: &mut [u8]) -> bool {
        const MACS: usize = ethernet::field::ETHERTYPE;
        if frame.len() < ethernet::HEADER_LEN || out.len() != frame.len() + TAG_LEN {
            return false;
        }
        out[..MACS].copy_from_slice(&frame[..MACS]);
        out[MACS..MACS + 2].copy_from_slice(&EtherType::VLAN.0.to_be_bytes());
        out[MACS + 2..MACS + 4].copy_from_slice(&self.tci(frame).to_be_bytes());
        out[MACS + TAG_LEN..].copy_from_slice(&frame[MACS..]);
        true
    }

    /// What a port with VLAN identity `vlan` (`None`: untagged, no 802.1Q) does with `frame`.
    pub fn classify(vlan: Option<&Vlan>, frame: &[u8]) -> Received {
        let own = vlan.map_or(0, |v| v.id);
        match ethertype(frame) {
            Some(EtherType::VLAN) => match tagged_vid(frame) {
                Some(vid) if Self::accepts(vlan, vid) => Received::Tagged,
                _ => Received::Foreign,
            },
            Some(EtherType::QINQ) => Received::Foreign,
            _ if own != 0 => Received::Foreign,
            _ => Received::Untagged,
        }
    }

    /// Whether a port with VLAN identity `vlan` accepts frames tagged `vid` (also a tag the
    /// device took off already, `RTE_MBUF_F_RX_VLAN_STRIPPED`). A priority tag (VID 0) on a
    /// port of no VLAN is untagged traffic (802.1Q 9.6).
    pub fn accepts(vlan: Option<&Vlan>, vid: u16) -> bool {
        vid & 0x0fff == vlan.map_or(0, |v| v.id)
    }

    /// Removes the tag of a [`Received::Tagged`] frame in place: moves the MACs over the tag.
    /// Returns where the untagged frame starts (`TAG_LEN`).
    pub fn strip_in_place(frame: &mut [u8]) -> usize {
        frame.copy_within(..ethernet::field::ETHERTYPE, TAG_LEN);
        TAG_LEN
    }

    /// The untagged copy of a [`Received::Tagged`] frame (when it cannot be changed in place).
    pub fn strip_into(frame: &[u8], out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(&frame[..ethernet::field::ETHERTYPE]);
        out.extend_from_slice(&frame[ethernet::field::ETHERTYPE + TAG_LEN..]);
    }
}

fn ethertype(frame: &[u8]) -> Option<EtherType> {
    let b = frame.get(ethernet::field::ETHERTYPE..ethernet::HEADER_LEN)?;
    Some(EtherType(u16::from_be_bytes([b[0], b[1]])))
}

/// The VID of a tagged frame long enough to hold a tag and the inner EtherType.
fn tagged_vid(frame: &[u8]) -> Option<u16> {
    let b = frame.get(ethernet::HEADER_LEN..ethernet::HEADER_LEN + 2)?;
    frame.get(ethernet::HEADER_LEN + TAG_LEN - 1)?;
    Some(u16::from_be_bytes([b[0], b[1]]) & 0x0fff)
}

/// The DSCP of an untagged IPv4 frame.
fn dscp_of(frame: &[u8]) -> Option<u8> {
    if ethertype(frame)? != EtherType::IPV4 {
        return None;
    }
    frame.get(ethernet::HEADER_LEN + 1).map(|tos| tos >> 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An untagged IPv4 frame head (MACs, EtherType, version/IHL, TOS) and 4 more bytes.
    fn ipv4_frame(dscp: u8) -> Vec<u8> {
        let mut f = vec![0u8; 22];
        f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[15] = dscp << 2;
        f[16..].copy_from_slice(&[1, 2, 3, 4, 5, 6]);
        f
    }

    fn tagged(vlan: &Vlan, frame: &[u8]) -> Vec<u8> {
        let mut out = vec![0u8; frame.len() + TAG_LEN];
        assert!(vlan.write_tagged(frame, &mut out));
        out
    }

    #[test]
    fn vlan_77_with_the_dscp_priority_tags_af31_as_priority_3() {
        let vlan = Vlan::new(Some(77), Pcp::FromDscp).unwrap();
        let frame = ipv4_frame(26);
        let t = tagged(&vlan, &frame);
        assert_eq!(&t[..12], &frame[..12], "the MACs stay first");
        assert_eq!(&t[12..16], &[0x81, 0x00, 0x60, 77], "TPID, PCP 3, VID 77");
        assert_eq!(
            &t[16..],
            &frame[12..],
            "then the frame's EtherType and payload"
        );
        assert_eq!(Vlan::classify(Some(&vlan), &t), Received::Tagged);
        let mut back = t.clone();
        let at = Vlan::strip_in_place(&mut back);
        assert_eq!(&back[at..], &frame[..]);
        let mut copy = Vec::new();
        Vlan::strip_into(&t, &mut copy);
        assert_eq!(copy, frame);
    }

    #[test]
    fn a_fixed_pcp_tags_every_frame_and_arp_gets_priority_0_from_the_dscp_rule() {
        let fixed = Vlan::new(Some(4094), Pcp::Fixed(6)).unwrap();
        let mut arp = ipv4_frame(0);
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(fixed.tci(&arp), 0xcffe);
        assert_eq!(fixed.tci(&ipv4_frame(46)), 0xcffe);
        let dscp = Vlan::new(Some(5), Pcp::FromDscp).unwrap();
        assert_eq!(dscp.tci(&arp), 5);
        assert_eq!(
            dscp.tci(&ipv4_frame(46)),
            (5 << 13) | 5,
            "EF (46) is priority 5"
        );
    }

    #[test]
    fn other_vlans_untagged_frames_on_a_vlan_and_stacked_tags_are_foreign() {
        let v77 = Vlan::new(Some(77), Pcp::FromDscp).unwrap();
        let v78 = Vlan::new(Some(78), Pcp::FromDscp).unwrap();
        let prio = Vlan::new(None, Pcp::Fixed(3)).unwrap();
        let frame = ipv4_frame(0);
        let on_78 = tagged(&v78, &frame);
        let priority_tagged = tagged(&prio, &frame);
        assert_eq!(&priority_tagged[14..16], &[0x60, 0], "VID 0, PCP 3");
        let mut qinq = on_78.clone();
        qinq[12..14].copy_from_slice(&[0x88, 0xa8]);
        let cases: [(&str, Option<&Vlan>, &[u8], Received); 8] = [
            (
                "VLAN 78 on a VLAN 77 port",
                Some(&v77),
                &on_78,
                Received::Foreign,
            ),
            (
                "untagged on a VLAN 77 port",
                Some(&v77),
                &frame,
                Received::Foreign,
            ),
            (
                "priority-tagged on a VLAN 77 port",
                Some(&v77),
                &priority_tagged,
                Received::Foreign,
            ),
            (
                "802.1ad on a VLAN 77 port",
                Some(&v77),
                &qinq,
                Received::Foreign,
            ),
            (
                "VLAN 78 on an untagged port",
                None,
                &on_78,
                Received::Foreign,
            ),
            (
                "untagged on an untagged port",
                None,
                &frame,
                Received::Untagged,
            ),
            (
                "priority-tagged on an untagged port",
                None,
                &priority_tagged,
                Received::Tagged,
            ),
            (
                "priority-tagged on a priority port",
                Some(&prio),
                &priority_tagged,
                Received::Tagged,
            ),
        ];
        for (what, port, f, want) in cases {
            assert_eq!(Vlan::classify(port, f), want, "{what}");
        }
        assert_eq!(
            Vlan::classify(None, &on_78[..15]),
            Received::Foreign,
            "a cut tag"
        );
    }

    /// A frame built `TAG_LEN` bytes into its buffer comes out tagged exactly as
    /// `write_tagged` tags a copy; a buffer too short for an Ethernet header stays unchanged.
    #[test]
    fn tagging_in_place_equals_tagging_a_copy() {
        let vlan = Vlan::new(Some(77), Pcp::FromDscp).unwrap();
        let frame = ipv4_frame(46);
        let mut buf = vec![0xee; TAG_LEN];
        buf.extend_from_slice(&frame);
        assert!(vlan.tag_in_place(&mut buf));
        assert_eq!(buf, tagged(&vlan, &frame));
        assert_eq!(&buf[12..16], &[0x81, 0x00, 0xa0, 77], "PCP 5 from EF");
        let mut short = [0u8; TAG_LEN + 13];
        assert!(!vlan.tag_in_place(&mut short));
        assert_eq!(short, [0u8; TAG_LEN + 13]);
    }

    #[test]
    fn out_of_range_ids_and_priorities_are_refused() {
        assert_eq!(Vlan::new(Some(0), Pcp::FromDscp), Err(VlanError::Id(0)));
        assert_eq!(
            Vlan::new(Some(4095), Pcp::FromDscp),
            Err(VlanError::Id(4095))
        );
        assert_eq!(Vlan::new(None, Pcp::Fixed(8)), Err(VlanError::Pcp(8)));
        assert!(!Vlan::new(None, Pcp::Fixed(0))
            .unwrap()
            .write_tagged(&[0u8; 13], &mut [0u8; 17]));
    }
}
