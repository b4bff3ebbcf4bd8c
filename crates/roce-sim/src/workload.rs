//! Verified workloads over a connected pair: side A posts `count` operations, keeping up to
//! `depth` in flight, and every byte and every completion is checked: each message delivered
//! exactly once, in order, intact; each work request completed exactly once, successfully, in
//! posting order. Used by the integration tests and by `roce-tool simulate`.

use super::pair::{Conn, Pair, SimError};
use crate::mem::access::Access;
use crate::mem::vec_memory::Region;
use crate::transport::qp::QpStats;
use crate::transport::types::{
    RecvWr, SendOp, SendWr, SgList, Sge, WcOpcode, WcStatus, WorkCompletion,
};
use core::fmt;
use core::time::Duration;
use std::collections::VecDeque;
use std::str::FromStr;

/// Protection domain the workload registers its memory in (the QPs' default PD).
const PD: u32 = 1;

/// One operation kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    Send,
    SendImm,
    Write,
    WriteImm,
    Read,
    FetchAdd,
    CompareSwap,
}

impl Op {
    fn consumes_recv(self) -> bool {
        matches!(self, Op::Send | Op::SendImm | Op::WriteImm)
    }
    fn is_atomic(self) -> bool {
        matches!(self, Op::FetchAdd | Op::CompareSwap)
    }
}

/// Which operations a workload runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WorkloadKind {
    Send,
    Write,
    WriteImm,
    Read,
    /// Fetch-and-add and compare-and-swap, alternating.
    Atomic,
    /// All operations in turn.
    Mixed,
}

impl WorkloadKind {
    /// Every kind, for help texts.
    pub const ALL: [(&'static str, WorkloadKind); 6] = [
        ("send", WorkloadKind::Send),
        ("write", WorkloadKind::Write),
        ("write-imm", WorkloadKind::WriteImm),
        ("read", WorkloadKind::Read),
        ("atomic", WorkloadKind::Atomic),
        ("mixed", WorkloadKind::Mixed),
    ];

    fn op(self, i: usize) -> Op {
        const MIXED: [Op; 7] = [
            Op::Send,
            Op::Write,
            Op::Read,
            Op::FetchAdd,
            Op::SendImm,
            Op::WriteImm,
            Op::CompareSwap,
        ];
        match self {
            WorkloadKind::Send => Op::Send,
            WorkloadKind::Write => Op::Write,
            WorkloadKind::WriteImm => Op::WriteImm,
            WorkloadKind::Read => Op::Read,
            WorkloadKind::Atomic => [Op::FetchAdd, Op::CompareSwap][i % 2],
            WorkloadKind::Mixed => MIXED[i % MIXED.len()],
        }
    }
}

impl FromStr for WorkloadKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .iter()
            .find(|(n, _)| *n == s)
            .map(|&(_, k)| k)
            .ok_or_else(|| {
                let names: Vec<_> = Self::ALL.iter().map(|(n, _)| *n).collect();
                format!("unknown workload {s:?} (one of {})", names.join(", "))
            })
    }
}

impl fmt::Display for WorkloadKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = Self::ALL
            .iter()
            .find(|(_, k)| k == self)
            .map_or("?", |(n, _)| n);
        f.write_str(name)
    }
}

/// What to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkloadSpec {
    pub kind: WorkloadKind,
    /// Message size in bytes (atomics are always 8).
    pub size: usize,
    /// Operations to run.
    pub count: usize,
    /// Operations in flight at most.
    pub depth: usize,
    /// Split each local buffer into this many scatter/gather entries (1..=16).
    pub sges: usize,
    /// Virtual-time limit for the whole run.
    pub limit: Duration,
}

impl Default for WorkloadSpec {
    fn default() -> Self {
        WorkloadSpec {
            kind: WorkloadKind::Mixed,
            size: 4096,
            count: 100,
            depth: 8,
            sges: 1,
            limit: Duration::from_secs(600),
        }
    }
}

/// What a verified run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkloadReport {
    pub ops: usize,
    /// Payload bytes moved by SEND / WRITE / READ.
    pub bytes: u64,
    pub sends_received: usize,
    pub completions_a: usize,
    pub completions_b: usize,
    pub virtual_time: Duration,
    /// Sum of both QPs' counters.
    pub qp: QpStats,
}

/// A verification failure.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    #[error("simulation: {0}")]
    Sim(#[from] SimError),
    #[error("invalid workload: {0}")]
    Invalid(String),
    #[error("verification failed: {0}")]
    Mismatch(String),
}

fn mismatch(s: String) -> WorkloadError {
    WorkloadError::Mismatch(s)
}

/// The byte `j` of message `i`: distinct per message and per offset.
pub fn pattern(i: usize, j: usize) -> u8 {
    (i.wrapping_mul(131) ^ j.wrapping_mul(7) ^ (j >> 8) ^ 0x5a) as u8
}

fn fill(buf: &mut [u8], i: usize) {
    for (j, b) in buf.iter_mut().enumerate() {
        *b = pattern(i, j);
    }
}

fn check(buf: &[u8], i: usize, what: &str) -> Result<(), WorkloadError> {
    match buf.iter().enumerate().find(|&(j, &b)| b != pattern(i, j)) {
        None => Ok(()),
        Some((j, &b)) => Err(mismatch(format!(
            "{what} of message {i}: byte {j} is {b:#04x}, expected {:#04x}",
            pattern(i, j)
        ))),
    }
}

/// Splits `[addr, addr+len)` into `n` scatter/gather entries (the last ones may be empty-free:
/// zero-length pieces are dropped).
fn sgl(region: &Region, offset: usize, len: usize, n: usize) -> SgList {
    let n = n.clamp(1, 16);
    let piece = len.div_ceil(n).max(1);
    let mut v = SgList::new();
    let mut off = 0;
    while off < len {
        let l = piece.min(len - off);
        v.push(Sge {
            addr: region.addr + (offset + off) as u64,
            len: l as u32,
            lkey: region.lkey,
        });
        off += l;
    }
    if v.is_empty() {
        // A 0-byte message still names a buffer.
        v.push(Sge {
            addr: region.addr + offset as u64,
            len: 0,
            lkey: region.lkey,
        });
    }
    v
}

struct Memories {
    /// A: source of sends/writes, destination of reads, one slot per depth.
    a_data: Region,
    /// A: 8-byte atomic results, one per depth.
    a_atomic: Region,
    /// B: destination of writes, source of reads.
    b_data: Region,
    /// B: receive buffers.
    b_recv: Region,
    /// B: the FAA counter (offset 0) and the CAS word (offset 8).
    b_atomic: Region,
}

struct InFlight {
    i: usize,
    op: Op,
    slot: usize,
}

/// Runs a verified workload from A to B on `conn`.
pub fn run_workload(
    pair: &mut Pair,
    conn: Conn,
    spec: &WorkloadSpec,
) -> Result<WorkloadReport, WorkloadError> {
    if spec.depth == 0 || spec.depth > 128 {
        return Err(WorkloadError::Invalid("depth must be 1..=128".into()));
    }
    if !(1..=16).contains(&spec.sges) {
        return Err(WorkloadError::Invalid("sges must be 1..=16".into()));
    }
    if spec.size > 64 << 20 {
        return Err(WorkloadError::Invalid("size must be at most 64 MiB".into()));
    }
    let size = spec.size;
    let slots = spec.depth;
    let slot_len = size.max(8);
    let all = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
    let m = Memories {
        a_data: pair.a.register(PD, slot_len * slots, Access::LOCAL_WRITE),
        a_atomic: pair.a.register(PD, 8 * slots, Access::LOCAL_WRITE),
        b_data: pair.b.register(PD, slot_len * slots, all),
        b_recv: pair.b.register(PD, slot_len * slots, Access::LOCAL_WRITE),
        b_atomic: pair
            .b
            .register(PD, 16, Access::LOCAL_WRITE | Access::REMOTE_ATOMIC),
    };
    let start = pair.now();
    let before_a = pair
        .a
        .qp(conn.qpn_a)
        .map(|q| *q.stats())
        .unwrap_or_default();
    let before_b = pair
        .b
        .qp(conn.qpn_b)
        .map(|q| *q.stats())
        .unwrap_or_default();

    let mut report = WorkloadReport::default();
    let mut inflight: VecDeque<InFlight> = VecDeque::new();
    // Receives B expects, in order: (message index, op, slot).
    let mut recvs: VecDeque<InFlight> = VecDeque::new();
    let (mut faa_done, mut cas_done) = (0u64, 0u64);
    let (mut faa_posted, mut cas_posted) = (0u64, 0u64);
    let mut posted = 0usize;
    let mut failure: Option<WorkloadError> = None;

    let deadline = start + spec.limit;
    while report.completions_a < spec.count {
        // Post while there is room.
        while posted < spec.count && inflight.len() < spec.depth {
            let i = posted;
            let op = spec.kind.op(i);
            let slot = i % slots;
            let now = pair.now();
            let off = slot * slot_len;
            if op.consumes_recv() {
                let recv_sgl = if op == Op::WriteImm {
                    SgList::new()
                } else {
                    sgl(&m.b_recv, off, size, spec.sges)
                };
                if let Some(b) = pair.b.mem.bytes_mut(m.b_recv.lkey) {
                    b[off..off + slot_len].fill(0);
                }
                pair.b
                    .post_recv(
                        conn.qpn_b,
                        RecvWr {
                            wr_id: i as u64,
                            sgl: recv_sgl,
                        },
                    )
                    .map_err(SimError::from)?;
                recvs.push_back(InFlight { i, op, slot });
            }
            let remote_addr = m.b_data.addr + off as u64;
            let rkey = m.b_data.rkey;
            let (sendop, local) = match op {
                Op::Send | Op::SendImm | Op::Write | Op::WriteImm => {
                    if let Some(b) = pair.a.mem.bytes_mut(m.a_data.lkey) {
                        fill(&mut b[off..off + size], i);
                    }
                    if let Some(b) = pair.b.mem.bytes_mut(m.b_data.lkey) {
                        b[off..off + slot_len].fill(0);
                    }
                    let o = match op {
                        Op::Send => SendOp::Send,
                        Op::SendImm => SendOp::SendWithImm { imm: i as u32 },
                        Op::Write => SendOp::Write { remote_addr, rkey },
                        _ => SendOp::WriteWithImm {
                            remote_addr,
                            rkey,
                            imm: i as u32,
                        },
                    };
                    (o, sgl(&m.a_data, off, size, spec.sges))
                }
                Op::Read => {
                    if let Some(b) = pair.b.mem.bytes_mut(m.b_data.lkey) {
                        fill(&mut b[off..off + size], i);
                    }
                    if let Some(b) = pair.a.mem.bytes_mut(m.a_data.lkey) {
                        b[off..off + slot_len].fill(0);
                    }
                    (
                        SendOp::Read { remote_addr, rkey },
                        sgl(&m.a_data, off, size, spec.sges),
                    )
                }
                Op::FetchAdd | Op::CompareSwap => {
                    let local = crate::sgl![Sge {
                        addr: m.a_atomic.addr + (slot * 8) as u64,
                        len: 8,
                        lkey: m.a_atomic.lkey,
                    }];
                    let o = if op == Op::FetchAdd {
                        faa_posted += 1;
                        SendOp::FetchAdd {
                            remote_addr: m.b_atomic.addr,
                            rkey: m.b_atomic.rkey,
                            add: 1,
                        }
                    } else {
                        let c = cas_posted;
                        cas_posted += 1;
                        SendOp::CompareSwap {
                            remote_addr: m.b_atomic.addr + 8,
                            rkey: m.b_atomic.rkey,
                            compare: c,
                            swap: c + 1,
                        }
                    };
                    (o, local)
                }
            };
            pair.a
                .post_send(
                    now,
                    conn.qpn_a,
                    SendWr {
                        wr_id: i as u64,
                        op: sendop,
                        sgl: local,
                        signaled: true,
                        fence: false,
                        solicited: false,
                    },
                )
                .map_err(SimError::from)?;
            inflight.push_back(InFlight { i, op, slot });
            posted += 1;
        }

        // Advance until some completion shows up.
        let mut got: Vec<(bool, WorkCompletion)> = Vec::new();
        pair.run_until(deadline.saturating_duration_since(pair.now()), |p| {
            while let Some(wc) = p.b.poll_completion() {
                got.push((false, wc));
            }
            while let Some(wc) = p.a.poll_completion() {
                got.push((true, wc));
            }
            !got.is_empty()
        })?;
        for (on_a, wc) in got {
            let r = if on_a {
                report.completions_a += 1;
                check_a(
                    pair,
                    &m,
                    &mut inflight,
                    &wc,
                    size,
                    slot_len,
                    &mut faa_done,
                    &mut cas_done,
                )
                .map(|bytes| report.bytes += bytes)
            } else {
                report.completions_b += 1;
                report.sends_received += 1;
                check_b(pair, &m, &mut recvs, &wc, size, slot_len)
            };
            if let Err(e) = r {
                failure.get_or_insert(e);
            }
        }
        if let Some(e) = failure {
            return Err(e);
        }
    }
    // Nothing more may complete: let every timer and frame settle, then look again.
    pair.run_idle(Duration::from_secs(60))?;
    if let Some(wc) = pair.a.poll_completion() {
        return Err(mismatch(format!(
            "extra completion on A after the run: {wc:?}"
        )));
    }
    if let Some(wc) = pair.b.poll_completion() {
        return Err(mismatch(format!(
            "extra completion on B after the run: {wc:?}"
        )));
    }
    if !recvs.is_empty() {
        return Err(mismatch(format!(
            "{} receives never completed",
            recvs.len()
        )));
    }
    let faa = pair
        .b
        .mem
        .bytes(m.b_atomic.lkey)
        .map(|b| u64::from_ne_bytes(b[0..8].try_into().unwrap_or([0; 8])))
        .unwrap_or(u64::MAX);
    if faa != faa_posted {
        return Err(mismatch(format!(
            "FAA counter is {faa}, expected {faa_posted} (each FAA executed exactly once)"
        )));
    }
    report.ops = spec.count;
    report.virtual_time = pair.now().saturating_duration_since(start);
    let after_a = pair
        .a
        .qp(conn.qpn_a)
        .map(|q| *q.stats())
        .unwrap_or_default();
    let after_b = pair
        .b
        .qp(conn.qpn_b)
        .map(|q| *q.stats())
        .unwrap_or_default();
    report.qp = stats_delta(&after_a, &before_a, &after_b, &before_b);
    for r in [m.a_data, m.a_atomic] {
        let _ = pair.a.mem.deregister(r.lkey);
    }
    for r in [m.b_data, m.b_recv, m.b_atomic] {
        let _ = pair.b.mem.deregister(r.lkey);
    }
    Ok(report)
}

#[allow(clippy::too_many_arguments)]
fn check_a(
    pair: &Pair,
    m: &Memories,
    inflight: &mut VecDeque<InFlight>,
    wc: &WorkCompletion,
    size: usize,
    slot_len: usize,
    faa_done: &mut u64,
    cas_done: &mut u64,
) -> Result<u64, WorkloadError> {
    let Some(f) = inflight.pop_front() else {
        return Err(mismatch(format!(
            "completion on A with nothing in flight: {wc:?}"
        )));
    };
    if wc.wr_id != f.i as u64 {
        return Err(mismatch(format!(
            "A completed wr_id {} but {} was the oldest in flight (out of order or duplicate)",
            wc.wr_id, f.i
        )));
    }
    if wc.status != WcStatus::Success {
        return Err(mismatch(format!(
            "message {} ({:?}) failed: {:?}",
            f.i, f.op, wc.status
        )));
    }
    let expect = match f.op {
        Op::Send | Op::SendImm => WcOpcode::Send,
        Op::Write | Op::WriteImm => WcOpcode::RdmaWrite,
        Op::Read => WcOpcode::RdmaRead,
        Op::FetchAdd => WcOpcode::FetchAdd,
        Op::CompareSwap => WcOpcode::CompSwap,
    };
    if wc.opcode != expect {
        return Err(mismatch(format!(
            "message {}: opcode {:?}, expected {expect:?}",
            f.i, wc.opcode
        )));
    }
    let off = f.slot * slot_len;
    match f.op {
        Op::Write | Op::WriteImm => {
            let b = pair.b.mem.bytes(m.b_data.lkey).unwrap_or(&[]);
            check(&b[off..off + size], f.i, "RDMA WRITE target")?;
            Ok(size as u64)
        }
        Op::Read => {
            if wc.byte_len as usize != size {
                return Err(mismatch(format!("READ {} byte_len {}", f.i, wc.byte_len)));
            }
            let a = pair.a.mem.bytes(m.a_data.lkey).unwrap_or(&[]);
            check(&a[off..off + size], f.i, "RDMA READ result")?;
            Ok(size as u64)
        }
        Op::Send | Op::SendImm => Ok(size as u64),
        Op::FetchAdd | Op::CompareSwap => {
            debug_assert!(f.op.is_atomic());
            let a = pair.a.mem.bytes(m.a_atomic.lkey).unwrap_or(&[]);
            let got =
                u64::from_ne_bytes(a[f.slot * 8..f.slot * 8 + 8].try_into().unwrap_or([0; 8]));
            let (want, ctr) = if f.op == Op::FetchAdd {
                (*faa_done, faa_done)
            } else {
                (*cas_done, cas_done)
            };
            if got != want {
                return Err(mismatch(format!(
                    "{:?} {} returned {got}, expected {want}",
                    f.op, f.i
                )));
            }
            *ctr += 1;
            Ok(0)
        }
    }
}

fn check_b(
    pair: &Pair,
    m: &Memories,
    recvs: &mut VecDeque<InFlight>,
    wc: &WorkCompletion,
    size: usize,
    slot_len: usize,
) -> Result<(), WorkloadError> {
    let Some(f) = recvs.pop_front() else {
        return Err(mismatch(format!(
            "completion on B with no receive posted: {wc:?}"
        )));
    };
    if wc.wr_id != f.i as u64 || wc.status != WcStatus::Success {
        return Err(mismatch(format!(
            "B expected receive {} to complete successfully, got {wc:?}",
            f.i
        )));
    }
    if wc.byte_len as usize != size {
        return Err(mismatch(format!(
            "receive {}: byte_len {} != {size}",
            f.i, wc.byte_len
        )));
    }
    let off = f.slot * slot_len;
    match f.op {
        Op::WriteImm => {
            if wc.opcode != WcOpcode::RecvRdmaWithImm || wc.imm_data != Some(f.i as u32) {
                return Err(mismatch(format!("WRITE-imm {}: {wc:?}", f.i)));
            }
            let b = pair.b.mem.bytes(m.b_data.lkey).unwrap_or(&[]);
            check(&b[off..off + size], f.i, "RDMA WRITE-imm target")
        }
        Op::Send | Op::SendImm => {
            let imm = (f.op == Op::SendImm).then_some(f.i as u32);
            if wc.opcode != WcOpcode::Recv || wc.imm_data != imm {
                return Err(mismatch(format!("SEND {}: {wc:?}", f.i)));
            }
            let b = pair.b.mem.bytes(m.b_recv.lkey).unwrap_or(&[]);
            check(&b[off..off + size], f.i, "received SEND")
        }
        _ => Err(mismatch(format!("unexpected receive completion {wc:?}"))),
    }
}

fn stats_delta(a1: &QpStats, a0: &QpStats, b1: &QpStats, b0: &QpStats) -> QpStats {
    (*a1 - *a0) + (*b1 - *b0)
}
