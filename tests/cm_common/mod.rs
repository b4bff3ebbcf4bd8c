//! Test harness for the CM: a `QpControl` that records transitions and enforces their order,
//! and two `Cm`s wired back to back with a virtual clock and a lossy wire.
#![allow(dead_code)]

use dpdk_roce::cm::{Cm, CmEvent, QpControl};
use dpdk_roce::time::Instant;
use dpdk_roce::transport::types::{QpAttr, QpError, QpState};
use dpdk_roce::wire::cm_msg::{CmMessage, ReqRepr};
use dpdk_roce::wire::mad::MadHeader;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};

/// Records every transition; panics on an illegal one (RESET→INIT→RTR→RTS, any→ERROR).
#[derive(Default)]
pub struct QpRecorder {
    pub states: HashMap<u32, QpState>,
    pub log: Vec<(u32, QpState, QpAttr)>,
    /// Refuse this transition once, to test error paths.
    pub fail: Option<(u32, QpState)>,
}

impl QpRecorder {
    pub fn state(&self, qpn: u32) -> QpState {
        *self.states.get(&qpn).unwrap_or(&QpState::Reset)
    }
    pub fn transitions(&self, qpn: u32) -> Vec<QpState> {
        self.log
            .iter()
            .filter(|(q, _, _)| *q == qpn)
            .map(|(_, s, _)| *s)
            .collect()
    }
    /// The attributes passed with the transition of `qpn` to `state`.
    pub fn attr(&self, qpn: u32, state: QpState) -> QpAttr {
        self.log
            .iter()
            .find(|(q, s, _)| *q == qpn && *s == state)
            .map(|(_, _, a)| *a)
            .unwrap_or_else(|| panic!("QP {qpn:#x} never went to {state:?}"))
    }
}

impl QpControl for QpRecorder {
    fn modify_qp(
        &mut self,
        _now: Instant,
        qpn: u32,
        state: QpState,
        attr: &QpAttr,
    ) -> Result<(), QpError> {
        if self.fail == Some((qpn, state)) {
            self.fail = None;
            return Err(QpError::InvalidTransition);
        }
        let cur = self.state(qpn);
        let legal = matches!(
            (cur, state),
            (_, QpState::Error)
                | (QpState::Reset, QpState::Init)
                | (QpState::Init, QpState::Rtr)
                | (QpState::Rtr, QpState::Rts)
        );
        assert!(
            legal,
            "illegal transition of QP {qpn:#x}: {cur:?} -> {state:?}"
        );
        self.states.insert(qpn, state);
        self.log.push((qpn, state, *attr));
        Ok(())
    }
}

pub const IP_A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub const IP_B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

/// Attribute ID of a MAD.
pub fn attr_of(mad: &[u8]) -> u16 {
    u16::from_be_bytes([mad[16], mad[17]])
}

/// Side of the pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    A,
    B,
}

/// Two CMs back to back.
pub struct Pair {
    pub now: Instant,
    /// The addresses of A and B (the source each side's MADs arrive from).
    pub ip_a: IpAddr,
    pub ip_b: IpAddr,
    pub a: Cm,
    pub b: Cm,
    pub qa: QpRecorder,
    pub qb: QpRecorder,
    pub ev_a: Vec<CmEvent>,
    pub ev_b: Vec<CmEvent>,
    /// Every MAD put on the wire: (sender, attribute ID, delivered?).
    pub wire: Vec<(Side, u16, bool)>,
    /// Drop the next n MADs with this attribute ID sent by this side.
    pub drops: HashMap<(Side, u16), usize>,
}

impl Pair {
    pub fn new() -> Pair {
        Pair::with_ips(IP_A.into(), IP_B.into())
    }

    /// A pair on these addresses (of one family).
    pub fn with_ips(ip_a: IpAddr, ip_b: IpAddr) -> Pair {
        Pair {
            now: Instant::from_nanos(1_000_000),
            ip_a,
            ip_b,
            a: Cm::new(ip_a, 0x0002_c903_0000_000a, 1),
            b: Cm::new(ip_b, 0x0002_c903_0000_000b, 2),
            qa: QpRecorder::default(),
            qb: QpRecorder::default(),
            ev_a: Vec::new(),
            ev_b: Vec::new(),
            wire: Vec::new(),
            drops: HashMap::new(),
        }
    }

    pub fn drop_next(&mut self, side: Side, attr: u16, n: usize) {
        self.drops.insert((side, attr), n);
    }

    /// MADs of `attr` sent by `side` so far.
    pub fn sent(&self, side: Side, attr: u16) -> usize {
        self.wire
            .iter()
            .filter(|(s, a, _)| *s == side && *a == attr)
            .count()
    }

    fn collect_events(&mut self) {
        while let Some(e) = self.a.poll_event() {
            self.ev_a.push(e);
        }
        while let Some(e) = self.b.poll_event() {
            self.ev_b.push(e);
        }
    }

    /// Deliver MADs until both sides are quiet (no clock movement).
    pub fn run(&mut self) {
        for _ in 0..100_000 {
            let mut moved = false;
            while let Some(t) = self.a.poll_transmit(self.now) {
                moved = true;
                assert_eq!(t.dst, self.ip_b);
                self.deliver(Side::A, t.mad);
            }
            while let Some(t) = self.b.poll_transmit(self.now) {
                moved = true;
                assert_eq!(t.dst, self.ip_a);
                self.deliver(Side::B, t.mad);
            }
            self.collect_events();
            if !moved {
                return;
            }
        }
        panic!("CM pair never went quiet");
    }

    fn deliver(&mut self, from: Side, mad: [u8; 256]) {
        CmMessage::parse(&mad).expect("the CM only sends well-formed MADs");
        let attr = attr_of(&mad);
        let dropped = match self.drops.get_mut(&(from, attr)) {
            Some(n) if *n > 0 => {
                *n -= 1;
                true
            }
            _ => false,
        };
        self.wire.push((from, attr, !dropped));
        if dropped {
            return;
        }
        match from {
            Side::A => self.b.handle_mad(self.now, self.ip_a, &mad, &mut self.qb),
            Side::B => self.a.handle_mad(self.now, self.ip_b, &mad, &mut self.qa),
        }
    }

    /// Jump the clock to the earliest deadline, fire timers, deliver. False when no timer.
    pub fn advance(&mut self) -> bool {
        let next = [self.a.poll_timeout(), self.b.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        let Some(t) = next else { return false };
        assert!(t >= self.now, "deadline in the past");
        self.now = t;
        self.a.handle_timeout(self.now, &mut self.qa);
        self.b.handle_timeout(self.now, &mut self.qb);
        self.collect_events();
        self.run();
        true
    }

    /// Advance until `pred` holds (or panic after `limit` steps).
    pub fn advance_until(&mut self, limit: usize, mut pred: impl FnMut(&Pair) -> bool) {
        for _ in 0..limit {
            if pred(self) {
                return;
            }
            assert!(self.advance(), "no timer left and condition not met");
        }
        assert!(pred(self), "condition not met after {limit} timer steps");
    }
}

/// A's REQ to B's port 1 (A connects QP 0x20), parsed, to edit and feed to B.
pub fn a_req(p: &mut Pair) -> (MadHeader, ReqRepr) {
    p.a.connect(
        p.now,
        dpdk_roce::cm::ConnectParams::new(p.ip_b, 1, 0x20, dpdk_roce::wire::psn::Psn::new(5)),
    )
    .unwrap();
    let req = p.a.poll_transmit(p.now).unwrap().mad;
    let (h, CmMessage::Req(r)) = CmMessage::parse(&req).unwrap() else {
        panic!("A sent no REQ")
    };
    (h, r)
}
