//! roce-soak: a long verified mix of every operation between two processes through the
//! provider's DAT-shaped Rust API, for runs over impaired links (`DPDK_ROCE_FAULTS` or the
//! profile's `[faults]` on both sides, or a relay in between: `roce-tool relay`).
//!
//! ```text
//! bash scripts/run-pair.sh target/release/roce-soak dpdk-config/af_packet-a.toml \
//!     dpdk-config/af_packet-b.toml --server-ip 10.77.0.1 -n 1000000 -q 4 -t 16
//! ```
//! Each of `-q` connections runs its own seeded sequence of steps (`plan`): RDMA WRITE then
//! READ back, RDMA WRITE with immediate then READ back, SEND, READ of a read-only area,
//! fetch-and-add and compare-and-swap, payloads of 1 B to `--max-size` spread over powers of
//! two, at most `-t` steps outstanding per connection, `-n` work requests in all. Both sides
//! derive the sequence from the client's seed, so every check has its expected value:
//!
//! * client: every work request completes exactly once, in order, successfully, with the
//!   opcode it was posted with; every READ returns the bytes written (or the read-only
//!   area's); every fetch-and-add returns the sum of the adds before it, every
//!   compare-and-swap the value the one before it set (an atomic executed twice breaks both);
//! * server: every receive is the next receive-consuming step of its connection, a SEND's
//!   length and every byte as planned, a WRITE with immediate's immediate its step number;
//!   when a connection's receives are all in, the server SENDs the count back, and the client
//!   ends only when every connection's count arrived.
//!
//! The client prints one line `SOAK messages=.. bytes=.. seconds=.. rate=..` when every check
//! passed; any failed check ends either side with an error (exit status 1).

use clap::Parser;
use dpdk_roce::config::Profile;
use dpdk_roce::dat::{
    ConnectionEventKind, DatError, DatEvent, DtoEvent, Ep, EpAttr, Evd, EvdFlags, Ia, Lmr, Psp, Pz,
    RmrTriplet,
};
use dpdk_roce::mem::access::Access;
use dpdk_roce::transport::types::{WcOpcode, WcStatus};
use roce_sim::payload;
use std::collections::VecDeque;
use std::io::Write;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

mod plan;

use plan::Step;

#[derive(Parser, Debug)]
#[command(
    name = "roce-soak",
    version,
    about = "a long verified mix of every RDMA operation between two processes"
)]
struct Args {
    /// dpdk-config profile of this process.
    #[arg(long)]
    profile: PathBuf,
    /// Run the server side (takes the parameters from the client).
    #[arg(long, conflicts_with = "client")]
    server: bool,
    /// Run the client side.
    #[arg(long)]
    client: bool,
    /// The server's RoCE address (client only).
    #[arg(long)]
    server_ip: Option<Ipv4Addr>,
    /// Connection qualifier (port) the server listens on.
    #[arg(long, default_value_t = 18610)]
    port: u16,
    /// Work requests in all (spread over the connections).
    #[arg(short = 'n', long = "messages", default_value_t = 100_000)]
    messages: u32,
    /// Connections.
    #[arg(short = 'q', long = "qps", default_value_t = 4,
          value_parser = clap::value_parser!(u16).range(1..=64))]
    qps: u16,
    /// Steps outstanding per connection.
    #[arg(short = 't', long = "depth", default_value_t = 16,
          value_parser = clap::value_parser!(u16).range(1..=64))]
    depth: u16,
    /// Largest payload in bytes.
    #[arg(long, default_value_t = 65536,
          value_parser = clap::value_parser!(u32).range(1..=1 << 20))]
    max_size: u32,
    /// Seed of the steps and payloads.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Give up when nothing completes for this many milliseconds.
    #[arg(long, default_value_t = 60_000)]
    timeout_ms: u64,
    /// Server: after the test, print `HOLDING` and keep the IA with its EPs open until standard
    /// input reaches end of file, so that the counters stay readable (`roce-tool stats`).
    #[arg(long, requires = "server")]
    hold: bool,
}

fn main() -> ExitCode {
    dpdk_roce::log::init_program();
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("roce-soak: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The test as the client asks for it, in every connection request's private data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Params {
    seed: u64,
    wrs_per_qp: u32,
    qps: u16,
    depth: u16,
    max_size: u32,
}

const PARAMS_LEN: usize = 20;
/// Private data: the parameters, then the connection's index.
const REQ_LEN: usize = PARAMS_LEN + 2;

impl Params {
    fn encode(&self, qp: u16) -> [u8; REQ_LEN] {
        let mut b = [0u8; REQ_LEN];
        b[..8].copy_from_slice(&self.seed.to_be_bytes());
        b[8..12].copy_from_slice(&self.wrs_per_qp.to_be_bytes());
        b[12..14].copy_from_slice(&self.qps.to_be_bytes());
        b[14..16].copy_from_slice(&self.depth.to_be_bytes());
        b[16..20].copy_from_slice(&self.max_size.to_be_bytes());
        b[20..22].copy_from_slice(&qp.to_be_bytes());
        b
    }

    /// A client's parameters and connection index, checked as the client's flags are.
    fn decode(b: &[u8]) -> Result<(Params, u16), String> {
        if b.len() < REQ_LEN {
            return Err(format!(
                "connection request with {} bytes of parameters",
                b.len()
            ));
        }
        let u16_at = |i: usize| u16::from_be_bytes([b[i], b[i + 1]]);
        let u32_at = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let p = Params {
            seed: u64::from_be_bytes(b[..8].try_into().map_err(|_| "seed")?),
            wrs_per_qp: u32_at(8),
            qps: u16_at(12),
            depth: u16_at(14),
            max_size: u32_at(16),
        };
        let qp = u16_at(20);
        let ok = p.wrs_per_qp > 0
            && (1..=64).contains(&p.qps)
            && (1..=64).contains(&p.depth)
            && (1..=1 << 20).contains(&p.max_size)
            && qp < p.qps;
        if ok {
            Ok((p, qp))
        } else {
            Err(format!("invalid parameters {p:?} for connection {qp}"))
        }
    }

    /// Bytes between two slots.
    fn stride(&self) -> u64 {
        u64::from(self.max_size).next_multiple_of(64)
    }

    /// Slots per connection: one per outstanding step, and one more.
    fn slots(&self) -> u64 {
        u64::from(self.depth) + 1
    }

    /// Receives the server keeps posted per connection.
    fn server_recvs(&self) -> u64 {
        u64::from(self.depth) + 2
    }

    /// An EP of either side: both DTO kinds on `dto`, connection events on `conn`.
    fn ep(&self, ia: &Ia, pz: &Pz, dto: &Evd, conn: &Evd) -> Result<Ep, String> {
        Ep::create(
            ia,
            pz,
            Some(dto),
            Some(dto),
            Some(conn),
            None,
            Some(self.ep_attr()),
        )
        .map_err(dat("EP"))
    }

    /// The EP attributes of both sides.
    fn ep_attr(&self) -> EpAttr {
        EpAttr {
            max_request_dtos: 2 * u32::from(self.depth) + 2,
            max_recv_dtos: self.server_recvs() as u32,
            max_rdma_read_in: 16,
            max_rdma_read_out: 16,
            ..EpAttr::default()
        }
    }
}

/// The server's exposed region: each connection's slots, the read-only area, then each
/// connection's two atomic words (fetch-and-add counter, compare-and-swap word).
#[derive(Clone, Copy, Debug)]
struct Target {
    p: Params,
}

impl Target {
    fn slot(&self, qp: u16, i: usize) -> u64 {
        (u64::from(qp) * self.p.slots() + i as u64 % self.p.slots()) * self.p.stride()
    }
    fn read_only(&self) -> u64 {
        u64::from(self.p.qps) * self.p.slots() * self.p.stride()
    }
    fn atomics(&self, qp: u16) -> u64 {
        self.read_only() + u64::from(self.p.max_size).next_multiple_of(64) + u64::from(qp) * 16
    }
    fn len(&self) -> u64 {
        self.atomics(self.p.qps)
    }
    /// Where READ step `i` of `qp` reads `size` bytes in the read-only area.
    fn read_only_at(&self, qp: u16, i: usize, size: u32) -> u64 {
        let room = u64::from(self.p.max_size - size) + 1;
        self.read_only() + plan::read_only_offset(qp, i, room)
    }
}

fn run(args: &Args) -> Result<(), String> {
    if args.server == args.client {
        return Err("say --server or --client".into());
    }
    let profile = Profile::load_with_env(&args.profile).map_err(|e| e.to_string())?;
    let ia = Ia::open(&profile).map_err(|e| format!("opening the IA: {e}"))?;
    let timeout = Duration::from_millis(args.timeout_ms);
    let r = if args.server {
        server(args, &ia, timeout, &profile.roce.cm)
    } else {
        client(args, &ia, timeout)
    };
    // The IA's objects are gone by now; close it so the engine stops in order.
    if let Err(refused) = ia.close() {
        eprintln!("closing the IA: {}", refused.error);
    }
    r
}

const RW: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_READ)
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_ATOMIC);

fn dat(what: &'static str) -> impl Fn(DatError) -> String {
    move |e| format!("{what}: {e}")
}

/// The next event of `evd`, failing after `timeout` without one.
fn next_event(evd: &Evd, timeout: Duration, what: &str) -> Result<DatEvent, String> {
    match evd.wait(Some(timeout), 1) {
        Ok(ev) => Ok(ev),
        Err(DatError::TimeoutExpired) => Err(format!("nothing happened for {timeout:?} ({what})")),
        Err(e) => Err(format!("waiting for {what}: {e}")),
    }
}

/// A successful DTO event, or the error naming it.
fn ok_dto(ev: DatEvent, what: &str) -> Result<DtoEvent, String> {
    match ev {
        DatEvent::Dto(d) if d.status == WcStatus::Success => Ok(d),
        other => Err(format!("{what}: {other:?}")),
    }
}

/// The connection events every EP must see, counted on `conn`.
fn wait_connections(
    conn: &Evd,
    n: usize,
    kind: ConnectionEventKind,
    timeout: Duration,
) -> Result<Vec<(u32, Vec<u8>)>, String> {
    let mut got = Vec::new();
    while got.len() < n {
        match next_event(conn, timeout, "connection events")? {
            DatEvent::Connection {
                ep,
                kind: k,
                private_data,
                ..
            } if k == kind => got.push((ep, private_data)),
            other => return Err(format!("waiting for {kind:?}: {other:?}")),
        }
    }
    Ok(got)
}

/// `cm`: this side's connection manager settings (the profile's), which time the client's
/// DREQ resends.
fn server(
    args: &Args,
    ia: &Ia,
    timeout: Duration,
    cm: &dpdk_roce::cm::CmConfig,
) -> Result<(), String> {
    let pz = Pz::create(ia).map_err(dat("PZ"))?;
    let dto = Evd::create(ia, 1 << 14, EvdFlags::DTO).map_err(dat("DTO EVD"))?;
    let conn = Evd::create(ia, 256, EvdFlags::CONNECTION).map_err(dat("connection EVD"))?;
    let cr_evd = Evd::create(ia, 256, EvdFlags::CR).map_err(dat("CR EVD"))?;
    let _psp = Psp::create(ia, args.port, &cr_evd).map_err(dat("PSP"))?;
    println!("READY listening on {}:{}", ia.address(), args.port);
    let _ = std::io::stdout().flush();
    let mut setup: Option<(Params, Lmr, Lmr)> = None;
    let mut eps: Vec<Option<Ep>> = Vec::new();
    let mut first = true;
    while eps.is_empty() || eps.iter().any(Option::is_none) {
        let wait = if first {
            Duration::from_secs(120)
        } else {
            timeout
        };
        first = false;
        let cr = match next_event(&cr_evd, wait, "connection requests")? {
            DatEvent::ConnectionRequest(cr) => cr,
            other => return Err(format!("unexpected {other:?}")),
        };
        let (p, qp) = Params::decode(cr.private_data())?;
        if setup.is_none() {
            let t = Target { p };
            let target = Lmr::create(&pz, t.len() as usize, RW).map_err(dat("target LMR"))?;
            let ro = payload::message(plan::read_only_stream(p.seed), 0, p.max_size as usize);
            target
                .write(t.read_only(), &ro)
                .map_err(dat("read-only area"))?;
            let rx_len = u64::from(p.qps) * p.server_recvs() * p.stride();
            let rx = Lmr::create(&pz, rx_len as usize, Access::LOCAL_WRITE)
                .map_err(dat("receive LMR"))?;
            eps = (0..p.qps).map(|_| None).collect();
            setup = Some((p, target, rx));
            eprintln!("test: {p:?}");
        }
        let Some((sp, target, rx)) = setup.as_ref() else {
            return Err("no test set up".into());
        };
        if *sp != p || eps[usize::from(qp)].is_some() {
            let _ = cr.reject(&[]);
            eprintln!("rejected a request for another test ({p:?}, connection {qp})");
            continue;
        }
        let ep = p.ep(ia, &pz, &dto, &conn)?;
        for b in 0..p.server_recvs() {
            post_server_recv(&ep, rx, &p, qp, b)?;
        }
        let mut desc = target.address().to_be_bytes().to_vec();
        desc.extend_from_slice(&target.rmr_context().to_be_bytes());
        cr.accept(&ep, &desc).map_err(dat("accept"))?;
        eps[usize::from(qp)] = Some(ep);
    }
    let eps: Vec<Ep> = eps.into_iter().flatten().collect();
    let (p, _target, rx) = setup.ok_or("no connection")?;
    wait_connections(&conn, eps.len(), ConnectionEventKind::Established, timeout)?;
    let by_qpn = |qpn: u32| eps.iter().position(|e| e.qpn() == qpn);
    // Each connection's receive-consuming steps, and how many of them arrived.
    let expect: Vec<Vec<(usize, Step)>> = (0..p.qps)
        .map(|qp| {
            plan::steps(p.seed, qp, p.wrs_per_qp, p.max_size)
                .into_iter()
                .enumerate()
                .filter(|(_, s)| s.consumes_recv())
                .collect()
        })
        .collect();
    let mut arrived = vec![0usize; eps.len()];
    let mut counts_sent = 0;
    let counts = Lmr::create(&pz, 8 * eps.len(), Access::LOCAL_WRITE).map_err(dat("count LMR"))?;
    for (qp, e) in expect.iter().enumerate() {
        if e.is_empty() {
            send_count(&eps[qp], &counts, qp, 0)?;
            counts_sent += 1;
        }
    }
    // The counts' send completions: a count the client got may still complete flushed (its
    // ACK lost when the client, having every count, disconnects).
    let mut counts_done = 0;
    while counts_sent < eps.len() {
        let ev = next_event(&dto, timeout, "receives").inspect_err(|_| {
            for (qp, e) in eps.iter().enumerate() {
                eprintln!(
                    "connection {qp}: {} of {} receives arrived; {}",
                    arrived[qp],
                    expect[qp].len(),
                    describe_ep(e)
                );
            }
        })?;
        let d = ok_dto(ev, "a server DTO")?;
        let qp = by_qpn(d.ep).ok_or_else(|| format!("a DTO of an unknown EP: {d:?}"))?;
        if d.opcode == WcOpcode::Send {
            counts_done += 1;
            continue;
        }
        let n = arrived[qp];
        let Some(&(i, step)) = expect[qp].get(n) else {
            return Err(format!("connection {qp}: a receive beyond the plan: {d:?}"));
        };
        let buf = d.cookie & 0xffff_ffff;
        match step {
            Step::Send { size } => {
                if d.opcode != WcOpcode::Recv || d.transferred_length != size {
                    return Err(format!(
                        "connection {qp} step {i}: expected a SEND of {size} B, got {d:?}"
                    ));
                }
                let at = recv_at(&p, qp as u16, buf);
                let got = rx
                    .read(at, size as usize)
                    .map_err(dat("reading a receive"))?;
                payload::check(&got, plan::stream(p.seed, qp as u16), i as u64).map_err(|e| {
                    format!("connection {qp} step {i}: SEND of {size} B corrupted: {e}")
                })?;
            }
            Step::WriteImmRead { .. } => {
                if d.opcode != WcOpcode::RecvRdmaWithImm || d.immediate != Some(i as u32) {
                    return Err(format!(
                        "connection {qp} step {i}: expected WRITE with immediate {i}, got {d:?}"
                    ));
                }
            }
            other => return Err(format!("step {other:?} consumes no receive")),
        }
        arrived[qp] += 1;
        if arrived[qp] == expect[qp].len() {
            send_count(&eps[qp], &counts, qp, arrived[qp] as u64)?;
            counts_sent += 1;
        } else {
            post_server_recv(&eps[qp], &rx, &p, qp as u16, buf)?;
        }
    }
    let received: usize = arrived.iter().sum();
    eprintln!("server: {received} receives verified over {counts_sent} connections");
    wait_connections(&conn, eps.len(), ConnectionEventKind::Disconnected, timeout)?;
    // Stay a while: a DREP lost on the way makes the client send its DREQ again, and only a
    // port still running answers it (else the client waits out its DREQ retries).
    let linger = Instant::now() + cm.dreq_resend_wait();
    while Instant::now() < linger {
        let _ = conn.wait(Some(Duration::from_millis(100)), 1);
    }
    // What remains: the counts' send completions (flushed or not) and the receives the
    // disconnect flushed.
    while let Ok(ev) = dto.dequeue() {
        match ev {
            DatEvent::Dto(d)
                if d.opcode == WcOpcode::Send
                    && matches!(d.status, WcStatus::Success | WcStatus::WrFlushErr) =>
            {
                counts_done += 1
            }
            DatEvent::Dto(d) if d.status == WcStatus::WrFlushErr => {}
            other => return Err(format!("an event after the end: {other:?}")),
        }
    }
    if counts_done != eps.len() {
        return Err(format!(
            "{counts_done} count sends completed, {} posted",
            eps.len()
        ));
    }
    println!("server done: {received} receives verified");
    if args.hold {
        println!("HOLDING until standard input closes");
        let _ = std::io::stdout().flush();
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
    }
    Ok(())
}

/// Where receive buffer `b` of connection `qp` is.
fn recv_at(p: &Params, qp: u16, b: u64) -> u64 {
    (u64::from(qp) * p.server_recvs() + b) * p.stride()
}

fn post_server_recv(ep: &Ep, rx: &Lmr, p: &Params, qp: u16, b: u64) -> Result<(), String> {
    let t = rx.triplet(recv_at(p, qp, b), p.stride() as u32);
    ep.post_recv(&[t], u64::from(qp) << 32 | b)
        .map_err(dat("posting a receive"))
}

fn send_count(ep: &Ep, counts: &Lmr, qp: usize, n: u64) -> Result<(), String> {
    let at = 8 * qp as u64;
    counts.write(at, &n.to_be_bytes()).map_err(dat("count"))?;
    ep.post_send(&[counts.triplet(at, 8)], 1 << 63)
        .map_err(dat("sending the count"))
}

/// A step the client has posted and not seen complete.
#[derive(Clone, Copy, Debug)]
struct Outstanding {
    index: usize,
    step: Step,
    /// Its work requests not completed yet.
    left: u32,
    /// What an atomic must return.
    expect: u64,
}

/// One connection of the client.
struct Conn {
    ep: Ep,
    steps: Vec<Step>,
    next: usize,
    posted: u64,
    completed: u64,
    outstanding: VecDeque<Outstanding>,
    fetch_add_sum: u64,
    swap_value: u64,
    count: Option<u64>,
}

impl Conn {
    /// Every step posted and completed, and the server's count of receives in.
    fn done(&self) -> bool {
        self.completed == self.posted && self.next == self.steps.len() && self.count.is_some()
    }
}

struct Client<'a> {
    p: Params,
    t: Target,
    local: &'a Lmr,
    remote: RmrTriplet,
    bytes: u64,
}

impl Client<'_> {
    /// The client's slot `i` of connection `qp`: `out` (sources) or the READ and atomic
    /// results after all connections' sources.
    fn local_slot(&self, qp: u16, i: usize, back: bool) -> u64 {
        let base = if back { self.t.read_only() } else { 0 };
        base + self.t.slot(qp, i)
    }

    fn remote(&self, at: u64, len: u32) -> RmrTriplet {
        RmrTriplet {
            rmr_context: self.remote.rmr_context,
            target_address: self.remote.target_address + at,
            segment_length: len,
        }
    }

    fn cookie(qp: u16, n: u64) -> u64 {
        u64::from(qp) << 32 | (n & 0xffff_ffff)
    }

    /// Posts the next step of connection `qp`.
    fn post_step(&mut self, qp: u16, c: &mut Conn) -> Result<(), String> {
        let i = c.next;
        let step = c.steps[i];
        let out = self.local_slot(qp, i, false);
        let back = self.local_slot(qp, i, true);
        let size = step.size();
        let e = dat("posting");
        let mut expect = 0;
        let first = Self::cookie(qp, c.posted);
        let second = Self::cookie(qp, c.posted + 1);
        match step {
            Step::WriteRead { .. } | Step::WriteImmRead { .. } | Step::Send { .. } => {
                let bytes =
                    payload::message(plan::stream(self.p.seed, qp), i as u64, size as usize);
                self.local
                    .write(out, &bytes)
                    .map_err(dat("filling a source"))?;
                let src = [self.local.triplet(out, size)];
                let dst = self.remote(self.t.slot(qp, i), size);
                match step {
                    Step::Send { .. } => c.ep.post_send(&src, first).map_err(e)?,
                    Step::WriteRead { .. } => c.ep.post_rdma_write(&src, &dst, first).map_err(e)?,
                    _ => {
                        c.ep.post_rdma_write_imm(&src, &dst, i as u32, first)
                            .map_err(e)?
                    }
                }
                if !matches!(step, Step::Send { .. }) {
                    self.local
                        .write(back, &vec![0u8; size as usize])
                        .map_err(dat("clearing"))?;
                    let into = [self.local.triplet(back, size)];
                    c.ep.post_rdma_read(&into, &dst, second)
                        .map_err(dat("posting"))?;
                }
            }
            Step::Read { .. } => {
                self.local
                    .write(back, &vec![0u8; size as usize])
                    .map_err(dat("clearing"))?;
                let from = self.remote(self.t.read_only_at(qp, i, size), size);
                c.ep.post_rdma_read(&[self.local.triplet(back, size)], &from, first)
                    .map_err(e)?;
            }
            Step::FetchAdd { add } => {
                expect = c.fetch_add_sum;
                c.fetch_add_sum = c.fetch_add_sum.wrapping_add(add);
                let word = self.remote(self.t.atomics(qp), 8);
                c.ep.post_fetch_add(add, &self.local.triplet(back, 8), &word, first)
                    .map_err(e)?;
            }
            Step::CmpSwap { swap } => {
                expect = c.swap_value;
                c.swap_value = swap;
                let word = self.remote(self.t.atomics(qp) + 8, 8);
                c.ep.post_cmp_and_swap(expect, swap, &self.local.triplet(back, 8), &word, first)
                    .map_err(e)?;
            }
        }
        c.posted += u64::from(step.wrs());
        c.next += 1;
        c.outstanding.push_back(Outstanding {
            index: i,
            step,
            left: step.wrs(),
            expect,
        });
        Ok(())
    }

    /// A request DTO of connection `qp`: the next one it posted.
    fn completed(&mut self, qp: u16, c: &mut Conn, d: &DtoEvent) -> Result<(), String> {
        if d.cookie != Self::cookie(qp, c.completed) {
            return Err(format!(
                "connection {qp}: completion {:#x}, expected work request {} (lost, duplicated or out of order)",
                d.cookie, c.completed
            ));
        }
        let Some(o) = c.outstanding.front_mut() else {
            return Err(format!(
                "connection {qp}: a completion with nothing outstanding: {d:?}"
            ));
        };
        let first = o.left == o.step.wrs();
        let opcode = match (o.step, first) {
            (Step::WriteRead { .. }, true) => WcOpcode::RdmaWrite,
            (Step::WriteImmRead { .. }, true) => WcOpcode::RdmaWrite,
            (Step::Send { .. }, _) => WcOpcode::Send,
            (Step::FetchAdd { .. }, _) => WcOpcode::FetchAdd,
            (Step::CmpSwap { .. }, _) => WcOpcode::CompSwap,
            _ => WcOpcode::RdmaRead,
        };
        // A WRITE with immediate's completion carries the immediate it sent.
        let imm = match (o.step, first) {
            (Step::WriteImmRead { .. }, true) => Some(o.index as u32),
            _ => None,
        };
        if d.opcode != opcode || (imm.is_some() && d.immediate != imm) {
            return Err(format!(
                "connection {qp} step {}: expected {opcode:?}, got {d:?}",
                o.index
            ));
        }
        c.completed += 1;
        o.left -= 1;
        if o.left > 0 {
            return Ok(());
        }
        let o = c.outstanding.pop_front().ok_or("outstanding")?;
        let back = self.local_slot(qp, o.index, true);
        let size = o.step.size();
        match o.step {
            Step::WriteRead { .. } | Step::WriteImmRead { .. } | Step::Read { .. } => {
                let got = self
                    .local
                    .read(back, size as usize)
                    .map_err(dat("reading back"))?;
                let seed = self.p.seed;
                let ok = if let Step::Read { .. } = o.step {
                    let at = (self.t.read_only_at(qp, o.index, size) - self.t.read_only()) as usize;
                    payload::check_at(&got, plan::read_only_stream(seed), 0, at)
                } else {
                    payload::check(&got, plan::stream(seed, qp), o.index as u64)
                };
                ok.map_err(|e| {
                    format!(
                        "connection {qp} step {}: {:?} read back other bytes: {e}",
                        o.index, o.step
                    )
                })?;
                self.bytes += u64::from(size) * u64::from(o.step.wrs());
            }
            Step::Send { size } => self.bytes += u64::from(size),
            Step::FetchAdd { .. } | Step::CmpSwap { .. } => {
                let got = self.local.read(back, 8).map_err(dat("reading an atomic"))?;
                let got = u64::from_ne_bytes(got.try_into().map_err(|_| "atomic result")?);
                if got != o.expect {
                    return Err(format!(
                        "connection {qp} step {}: {:?} returned {got:#x}, expected {:#x} (executed twice or lost?)",
                        o.index, o.step, o.expect
                    ));
                }
                self.bytes += 8;
            }
        }
        Ok(())
    }
}

fn client(args: &Args, ia: &Ia, timeout: Duration) -> Result<(), String> {
    let server_ip = args.server_ip.ok_or("--client needs --server-ip")?;
    let p = Params {
        seed: args.seed,
        wrs_per_qp: args.messages.div_ceil(u32::from(args.qps)).max(1),
        qps: args.qps,
        depth: args.depth,
        max_size: args.max_size,
    };
    let t = Target { p };
    let pz = Pz::create(ia).map_err(dat("PZ"))?;
    let dto = Evd::create(ia, 1 << 14, EvdFlags::DTO).map_err(dat("DTO EVD"))?;
    let conn = Evd::create(ia, 256, EvdFlags::CONNECTION).map_err(dat("connection EVD"))?;
    // Sources, then READ and atomic results (the target's layout twice), then the counts.
    let counts_at = 2 * t.read_only();
    let local = Lmr::create(
        &pz,
        (counts_at + 8 * u64::from(p.qps)) as usize,
        Access::LOCAL_WRITE,
    )
    .map_err(dat("LMR"))?;
    let mut conns = Vec::new();
    for qp in 0..p.qps {
        let ep = p.ep(ia, &pz, &dto, &conn)?;
        let at = counts_at + 8 * u64::from(qp);
        ep.post_recv(&[local.triplet(at, 8)], 1 << 63 | u64::from(qp))
            .map_err(dat("posting the count's receive"))?;
        ep.connect(server_ip, args.port, &p.encode(qp))
            .map_err(dat("connect"))?;
        conns.push(Conn {
            ep,
            steps: plan::steps(p.seed, qp, p.wrs_per_qp, p.max_size),
            next: 0,
            posted: 0,
            completed: 0,
            outstanding: VecDeque::new(),
            fetch_add_sum: 0,
            swap_value: 0,
            count: None,
        });
    }
    let up = wait_connections(
        &conn,
        conns.len(),
        ConnectionEventKind::Established,
        timeout,
    )?;
    let (_, desc) = &up[0];
    if desc.len() < 12 || up.iter().any(|(_, d)| d != desc) {
        return Err(format!(
            "the server's region descriptors differ or are short: {up:?}"
        ));
    }
    let remote = RmrTriplet {
        target_address: u64::from_be_bytes(desc[..8].try_into().map_err(|_| "descriptor")?),
        rmr_context: u32::from_be_bytes(desc[8..12].try_into().map_err(|_| "descriptor")?),
        segment_length: t.len() as u32,
    };
    eprintln!("{} connections up; {p:?}", conns.len());
    let mut cl = Client {
        p,
        t,
        local: &local,
        remote,
        bytes: 0,
    };
    let started = Instant::now();
    let total: u64 = conns
        .iter()
        .map(|c| c.steps.iter().map(|s| u64::from(s.wrs())).sum::<u64>())
        .sum();
    let mut report = Instant::now();
    let bar = roce_perf::progress::Progress::new(total, "work requests");
    let mut since_bar = 0u32;
    loop {
        for (qp, c) in conns.iter_mut().enumerate() {
            while c.next < c.steps.len() && c.outstanding.len() < usize::from(cl.p.depth) {
                cl.post_step(qp as u16, c)?;
            }
        }
        if conns.iter().all(Conn::done) {
            break;
        }
        let ev = next_event(&dto, timeout, "completions").inspect_err(|_| {
            print_recovery(&conns);
            for (qp, c) in conns.iter().enumerate().filter(|(_, c)| !c.done()) {
                let oldest = c.outstanding.front().map(|o| (o.index, o.step));
                eprintln!(
                    "connection {qp}: {} of {} work requests completed, step {} of {}, \
                     oldest outstanding {oldest:?}, count {:?}; {}",
                    c.completed,
                    c.posted,
                    c.next,
                    c.steps.len(),
                    c.count,
                    describe_ep(&c.ep)
                );
            }
        })?;
        let d = ok_dto(ev, "a client DTO")?;
        let qp = conns
            .iter()
            .position(|c| c.ep.qpn() == d.ep)
            .ok_or_else(|| format!("a DTO of an unknown EP: {d:?}"))?;
        let c = &mut conns[qp];
        if d.cookie >> 63 == 1 {
            let at = counts_at + 8 * qp as u64;
            let n = local.read(at, 8).map_err(dat("count"))?;
            let n = u64::from_be_bytes(n.try_into().map_err(|_| "count")?);
            let want = c.steps.iter().filter(|s| s.consumes_recv()).count() as u64;
            if d.opcode != WcOpcode::Recv || n != want || c.count.is_some() {
                return Err(format!(
                    "connection {qp}: the server counted {n} receives, {want} were sent ({d:?})"
                ));
            }
            c.count = Some(n);
            continue;
        }
        cl.completed(qp as u16, c, &d)?;
        since_bar += 1;
        if since_bar == 4096 {
            bar.inc(4096);
            since_bar = 0;
        }
        if report.elapsed() > Duration::from_secs(10) {
            report = Instant::now();
            let done: u64 = conns.iter().map(|c| c.completed).sum();
            bar.eprintln(&format!("{done} of {total} work requests done"));
        }
    }
    drop(bar);
    let secs = started.elapsed().as_secs_f64();
    let messages: u64 = conns.iter().map(|c| c.completed).sum();
    print_recovery(&conns);
    for c in &conns {
        c.ep.disconnect().map_err(dat("disconnect"))?;
    }
    wait_connections(
        &conn,
        conns.len(),
        ConnectionEventKind::Disconnected,
        timeout,
    )?;
    if let Ok(ev) = dto.dequeue() {
        return Err(format!("an event after the end: {ev:?}"));
    }
    println!(
        "SOAK messages={messages} bytes={} seconds={secs:.2} rate={:.0}/s: every work request \
         completed once, in order, its data and result as planned",
        cl.bytes,
        messages as f64 / secs
    );
    Ok(())
}

/// An EP's QP for a stall report: where its sequence state stands and what it went through.
fn describe_ep(ep: &Ep) -> String {
    let snapshot = match ep.transport_snapshot() {
        Ok(q) => q.to_string(),
        Err(e) => format!("snapshot: {e}"),
    };
    match ep.transport_stats() {
        Ok(s) => format!(
            "QP {:#x} {snapshot}; sent={} received={} retransmits={} timeouts={} \
             tail_probes={} seq_naks sent/received={}/{} rnr_naks sent/received={}/{} \
             duplicates={} duplicate_responses={} dropped={}",
            ep.qpn(),
            s.packets_sent,
            s.packets_received,
            s.retransmits,
            s.timeouts,
            s.tail_probes,
            s.seq_naks_sent,
            s.seq_naks_received,
            s.rnr_naks_sent,
            s.rnr_naks_received,
            s.duplicates,
            s.duplicate_responses,
            s.dropped
        ),
        Err(e) => format!("QP {:#x} {snapshot}; counters: {e}", ep.qpn()),
    }
}

/// The client's requesters over every connection: how the losses were recovered.
fn print_recovery(conns: &[Conn]) {
    let mut sum = dpdk_roce::transport::qp::QpStats::default();
    for c in conns {
        match c.ep.transport_stats() {
            Ok(s) => sum += s,
            Err(e) => eprintln!("transport counters: {e}"),
        }
    }
    println!(
        "RECOVERY packets_sent={} retransmits={} seq_naks_received={} rnr_naks_received={} \
         timeouts={} tail_probes={} duplicate_responses={}",
        sum.packets_sent,
        sum.retransmits,
        sum.seq_naks_received,
        sum.rnr_naks_received,
        sum.timeouts,
        sum.tail_probes,
        sum.duplicate_responses
    );
}
