//! The verified workload, one engine for every way two QPs are driven: side A posts `count`
//! operations, keeping up to `depth` in flight, and every byte and every completion is
//! checked: each message delivered exactly once, in order, intact ([`crate::payload`]); each
//! work request completed exactly once, successfully, in posting order; each atomic executed
//! exactly once. What it runs over is an [`Endpoints`]: the simulated pair on a virtual clock
//! or on a real wire ([`sim`]: the integration tests, `roce-tool simulate`, `roce-dpdk-pair`),
//! or two engines ([`crate::verify`]: `roce-engine-pair`).

pub(crate) mod endpoints;
mod sim;
#[cfg(test)]
mod tests;

pub use endpoints::{Endpoints, Side};
pub use sim::{run_workload, SimConn};

use crate::mem::access::Access;
use crate::mem::vec_memory::Region;
use crate::payload;
use crate::transport::qp::QpStats;
use crate::transport::types::{
    RecvWr, SendOp, SendWr, SgList, Sge, WcOpcode, WcStatus, WorkCompletion,
};
use core::fmt;
use core::time::Duration;
use std::collections::VecDeque;
use std::str::FromStr;

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
    Sim(#[from] crate::pair::SimError),
    /// What the endpoints under the workload refused (an engine's or host's error).
    #[error("endpoints: {0}")]
    Endpoints(String),
    #[error("invalid workload: {0}")]
    Invalid(String),
    #[error("verification failed: {0}")]
    Mismatch(String),
}

fn mismatch(s: String) -> WorkloadError {
    WorkloadError::Mismatch(s)
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

/// The workload's memory.
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

/// A work request in flight: message `i`, its operation and its slot.
struct InFlight {
    i: usize,
    op: Op,
    slot: usize,
}

/// What the checks of a run keep between completions.
struct Checker {
    qpn_a: u32,
    qpn_b: u32,
    /// The payload stream of the run's messages.
    stream: u64,
    size: usize,
    slot_len: usize,
    /// A's work requests, oldest first.
    inflight: VecDeque<InFlight>,
    /// The receives B expects to complete, in order.
    recvs: VecDeque<InFlight>,
    /// Fetch-and-adds and compare-and-swaps completed: what the next one must return.
    faa_done: u64,
    cas_done: u64,
}

/// Runs a verified workload from A to B over `ends`.
pub fn run_verified<E: Endpoints>(
    ends: &mut E,
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
        a_data: ends.register(Side::A, slot_len * slots, Access::LOCAL_WRITE)?,
        a_atomic: ends.register(Side::A, 8 * slots, Access::LOCAL_WRITE)?,
        b_data: ends.register(Side::B, slot_len * slots, all)?,
        b_recv: ends.register(Side::B, slot_len * slots, Access::LOCAL_WRITE)?,
        b_atomic: ends.register(Side::B, 16, Access::LOCAL_WRITE | Access::REMOTE_ATOMIC)?,
    };
    let result = run_on(ends, spec, &m);
    for r in [m.a_data, m.a_atomic] {
        ends.deregister(Side::A, &r)?;
    }
    for r in [m.b_data, m.b_recv, m.b_atomic] {
        ends.deregister(Side::B, &r)?;
    }
    result
}

fn run_on<E: Endpoints>(
    ends: &mut E,
    spec: &WorkloadSpec,
    m: &Memories,
) -> Result<WorkloadReport, WorkloadError> {
    let (size, slots) = (spec.size, spec.depth);
    let slot_len = size.max(8);
    let start = ends.elapsed();
    let before = ends.qp_stats()?;
    let mut report = WorkloadReport::default();
    let (qpn_a, qpn_b) = ends.qpns();
    let mut c = Checker {
        qpn_a,
        qpn_b,
        stream: u64::from(qpn_a),
        size,
        slot_len,
        inflight: VecDeque::new(),
        recvs: VecDeque::new(),
        faa_done: 0,
        cas_done: 0,
    };
    let (mut faa_posted, mut cas_posted) = (0u64, 0u64);
    let mut posted = 0usize;
    let zeros = vec![0u8; slot_len];
    // Until A's every work request and B's every receive completed: B's last receive may
    // complete after A's last work request.
    while report.completions_a < spec.count || !c.recvs.is_empty() {
        // Post while there is room and the next message's slot is free: B's receive of
        // the slot's last message may complete after A's completion of it (the ACK can
        // overtake B's completion event), and its bytes are checked then.
        while posted < spec.count
            && c.inflight.len() < spec.depth
            && !c.recvs.iter().any(|r| r.slot == posted % slots)
        {
            let i = posted;
            let op = spec.kind.op(i);
            let slot = i % slots;
            let off = slot * slot_len;
            let message = || payload::message(c.stream, i as u64, size);
            if op.consumes_recv() {
                let recv_sgl = if op == Op::WriteImm {
                    SgList::new()
                } else {
                    sgl(&m.b_recv, off, size, spec.sges)
                };
                ends.write(Side::B, &m.b_recv, off, &zeros)?;
                ends.post_recv(RecvWr {
                    wr_id: i as u64,
                    sgl: recv_sgl,
                })?;
                c.recvs.push_back(InFlight { i, op, slot });
            }
            let remote_addr = m.b_data.addr + off as u64;
            let rkey = m.b_data.rkey;
            let (sendop, local) = match op {
                Op::Send | Op::SendImm | Op::Write | Op::WriteImm => {
                    ends.write(Side::A, &m.a_data, off, &message())?;
                    ends.write(Side::B, &m.b_data, off, &zeros)?;
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
                    ends.write(Side::B, &m.b_data, off, &message())?;
                    ends.write(Side::A, &m.a_data, off, &zeros)?;
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
                        let v = cas_posted;
                        cas_posted += 1;
                        SendOp::CompareSwap {
                            remote_addr: m.b_atomic.addr + 8,
                            rkey: m.b_atomic.rkey,
                            compare: v,
                            swap: v + 1,
                        }
                    };
                    (o, local)
                }
            };
            ends.post_send(SendWr {
                wr_id: i as u64,
                op: sendop,
                sgl: local,
                signaled: true,
                fence: false,
                solicited: false,
            })?;
            c.inflight.push_back(InFlight { i, op, slot });
            posted += 1;
        }

        // Move on until some completion shows up, and check each.
        let left = spec
            .limit
            .saturating_sub(ends.elapsed().saturating_sub(start));
        let mut failure = None;
        for (side, wc) in ends.completions(left)? {
            let r = match side {
                Side::A => {
                    report.completions_a += 1;
                    c.check_a(ends, m, &wc).map(|bytes| report.bytes += bytes)
                }
                Side::B => {
                    report.completions_b += 1;
                    report.sends_received += 1;
                    c.check_b(ends, m, &wc)
                }
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
    if let Some((side, wc)) = ends.settle()?.into_iter().next() {
        return Err(mismatch(format!(
            "extra completion on {side:?} after the run: {wc:?}"
        )));
    }
    if !c.recvs.is_empty() {
        return Err(mismatch(format!(
            "{} receives never completed",
            c.recvs.len()
        )));
    }
    let faa = ends.read(Side::B, &m.b_atomic, 0, 8)?;
    let faa = u64::from_ne_bytes(faa[..8].try_into().unwrap_or([0xff; 8]));
    if faa != faa_posted {
        return Err(mismatch(format!(
            "FAA counter is {faa}, expected {faa_posted} (each FAA executed exactly once)"
        )));
    }
    report.ops = spec.count;
    report.virtual_time = ends.elapsed().saturating_sub(start);
    report.qp = ends.qp_stats()? - before;
    Ok(report)
}

impl Checker {
    /// A completion on A: the oldest work request in flight, successful, with its opcode, its
    /// READ's bytes or its WRITE's bytes at B, its atomic's value. Returns the payload bytes
    /// it moved.
    fn check_a<E: Endpoints>(
        &mut self,
        ends: &mut E,
        m: &Memories,
        wc: &WorkCompletion,
    ) -> Result<u64, WorkloadError> {
        self.own_qp(Side::A, wc)?;
        let Some(f) = self.inflight.pop_front() else {
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
        let (size, off) = (self.size, f.slot * self.slot_len);
        match f.op {
            Op::Write | Op::WriteImm => {
                let b = ends.read(Side::B, &m.b_data, off, size)?;
                self.check(&b, f.i, "RDMA WRITE target")?;
                Ok(size as u64)
            }
            Op::Read => {
                if wc.byte_len as usize != size {
                    return Err(mismatch(format!("READ {} byte_len {}", f.i, wc.byte_len)));
                }
                let a = ends.read(Side::A, &m.a_data, off, size)?;
                self.check(&a, f.i, "RDMA READ result")?;
                Ok(size as u64)
            }
            Op::Send | Op::SendImm => Ok(size as u64),
            Op::FetchAdd | Op::CompareSwap => {
                let a = ends.read(Side::A, &m.a_atomic, f.slot * 8, 8)?;
                let got = u64::from_ne_bytes(a[..8].try_into().unwrap_or([0xff; 8]));
                let done = if f.op == Op::FetchAdd {
                    &mut self.faa_done
                } else {
                    &mut self.cas_done
                };
                if got != *done {
                    return Err(mismatch(format!(
                        "{:?} {} returned {got}, expected {done}",
                        f.op, f.i
                    )));
                }
                *done += 1;
                Ok(0)
            }
        }
    }

    /// A completion on B: the oldest receive, successful, with its length, opcode, immediate
    /// and bytes.
    fn check_b<E: Endpoints>(
        &mut self,
        ends: &mut E,
        m: &Memories,
        wc: &WorkCompletion,
    ) -> Result<(), WorkloadError> {
        self.own_qp(Side::B, wc)?;
        let Some(f) = self.recvs.pop_front() else {
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
        let (size, off) = (self.size, f.slot * self.slot_len);
        if wc.byte_len as usize != size {
            return Err(mismatch(format!(
                "receive {}: byte_len {} != {size}",
                f.i, wc.byte_len
            )));
        }
        match f.op {
            Op::WriteImm => {
                if wc.opcode != WcOpcode::RecvRdmaWithImm || wc.imm_data != Some(f.i as u32) {
                    return Err(mismatch(format!("WRITE-imm {}: {wc:?}", f.i)));
                }
                let b = ends.read(Side::B, &m.b_data, off, size)?;
                self.check(&b, f.i, "RDMA WRITE-imm target")
            }
            Op::Send | Op::SendImm => {
                let imm = (f.op == Op::SendImm).then_some(f.i as u32);
                if wc.opcode != WcOpcode::Recv || wc.imm_data != imm {
                    return Err(mismatch(format!("SEND {}: {wc:?}", f.i)));
                }
                let b = ends.read(Side::B, &m.b_recv, off, size)?;
                self.check(&b, f.i, "received SEND")
            }
            _ => Err(mismatch(format!("unexpected receive completion {wc:?}"))),
        }
    }

    /// `wc` names the run's QP of `side`.
    fn own_qp(&self, side: Side, wc: &WorkCompletion) -> Result<(), WorkloadError> {
        let qpn = match side {
            Side::A => self.qpn_a,
            Side::B => self.qpn_b,
        };
        if wc.qp_num == qpn {
            return Ok(());
        }
        Err(mismatch(format!(
            "completion on {side:?} of QP {:#x}, not the run's {qpn:#x}: {wc:?}",
            wc.qp_num
        )))
    }

    /// `buf` holds message `i` of the run's stream.
    fn check(&self, buf: &[u8], i: usize, what: &str) -> Result<(), WorkloadError> {
        payload::check(buf, self.stream, i as u64).map_err(|e| mismatch(format!("{what}: {e}")))
    }
}
