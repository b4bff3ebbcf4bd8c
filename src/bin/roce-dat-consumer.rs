//! roce-dat-consumer: a DAT 2.0 consumer process that links libdat2 and reaches the provider
//! `dat.conf` (DAT_OVERRIDE) names through the registry, then feeds it bad input. Each case
//! prints one line
//!
//! ```text
//! CASE <name> expected=<DAT code, event or status> got=<...> PASS|FAIL
//! ```
//!
//! and the process exits non-zero when any case failed. Roles (used by
//! `tests/dat_bad_input.rs` over a veth pair):
//!
//! * `local --nobody IP`: no peer needed. Garbage, freed, forged and wrong-type handles; NULL
//!   out-pointers; wrong sizes and posts beyond the queue depth on an unconnected EP; posts in
//!   the wrong state; a connect to an address nobody answers, with a timeout (TIMED_OUT) and
//!   without (ARP fails: UNREACHABLE).
//! * `server --qual Q`: listens on Q and serves connection after connection. Accept private
//!   data describes its memory: a target region between two unregistered guard pages, a region
//!   of another PZ, a freed region. After each connection it checks that no byte outside
//!   registered memory (and none of the target's tail) changed.
//! * `client --server IP --qual Q`: per case a fresh connection: RDMA to an unregistered,
//!   freed, wrong-PZ or out-of-bounds rkey, too many IOVs, a segment longer than its LMR, a
//!   wrong lmr_context, posts beyond the request queue depth, a connect to a qualifier with no
//!   listener.
//! * `stream --server IP --qual Q`: a long stream of sends and RDMA writes with receives
//!   posted; prints `STREAMING` once data moves. The test kills the server (SIGKILL); the
//!   stream must end with a broken connection and every outstanding DTO completed (flushed),
//!   none lost. Prints `BROKEN`, reads one line from stdin (the test starts a new server), then
//!   connects again and moves verified data.

use clap::{Parser, Subcommand};
use dat_sys as d;
use dpdk_roce::dat::ffi::consumer::{
    self as c, ep_state, strerror, Event, Forged, Handle, Region, Remote, Segment, INFINITE,
};
use std::io::Write;
use std::net::Ipv4Addr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(about = "DAT 2.0 consumer that feeds the provider bad input through libdat2")]
struct Args {
    /// The IA name in dat.conf.
    #[arg(long, default_value = "dr")]
    ia: String,
    #[command(subcommand)]
    role: Role,
}

#[derive(Subcommand)]
enum Role {
    /// Cases that need no peer.
    Local {
        /// An address of the subnet nobody answers (ARP fails).
        #[arg(long)]
        nobody: Ipv4Addr,
    },
    /// Serves connections on --qual until killed.
    Server {
        #[arg(long)]
        qual: u64,
        /// Stop after this many connections (0: never).
        #[arg(long, default_value_t = 0)]
        connections: u32,
    },
    /// The connected cases against a server.
    Client {
        #[arg(long)]
        server: Ipv4Addr,
        #[arg(long)]
        qual: u64,
    },
    /// A long stream the test interrupts by killing the server.
    Stream {
        #[arg(long)]
        server: Ipv4Addr,
        #[arg(long)]
        qual: u64,
    },
}

// ---- reporting ---------------------------------------------------------------------------

/// A DAT_RETURN's name: `DAT_SUCCESS` or `MAJOR/SUBTYPE` (dat_strerror).
fn code_name(code: u32) -> String {
    if code == d::DAT_SUCCESS {
        return "DAT_SUCCESS".into();
    }
    let (major, minor) = strerror(code);
    if minor.is_empty() || minor == "DAT_NO_SUBTYPE" {
        format!("{major}({code:#x})")
    } else {
        format!("{major}/{minor}({code:#x})")
    }
}

fn event_name(n: u32) -> String {
    let names = [
        (d::DAT_CONNECTION_EVENT_ESTABLISHED, "ESTABLISHED"),
        (d::DAT_CONNECTION_EVENT_PEER_REJECTED, "PEER_REJECTED"),
        (
            d::DAT_CONNECTION_EVENT_NON_PEER_REJECTED,
            "NON_PEER_REJECTED",
        ),
        (
            d::DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR,
            "ACCEPT_COMPLETION_ERROR",
        ),
        (d::DAT_CONNECTION_EVENT_DISCONNECTED, "DISCONNECTED"),
        (d::DAT_CONNECTION_EVENT_BROKEN, "BROKEN"),
        (d::DAT_CONNECTION_EVENT_TIMED_OUT, "TIMED_OUT"),
        (d::DAT_CONNECTION_EVENT_UNREACHABLE, "UNREACHABLE"),
    ];
    names
        .iter()
        .find(|(v, _)| *v == n)
        .map(|(_, s)| format!("DAT_CONNECTION_EVENT_{s}"))
        .unwrap_or_else(|| format!("event({n:#x})"))
}

fn status_name(s: u32) -> String {
    let names = [
        (d::DAT_DTO_SUCCESS, "DAT_DTO_SUCCESS"),
        (d::DAT_DTO_ERR_FLUSHED, "DAT_DTO_ERR_FLUSHED"),
        (d::DAT_DTO_ERR_LOCAL_LENGTH, "DAT_DTO_ERR_LOCAL_LENGTH"),
        (d::DAT_DTO_ERR_LOCAL_EP, "DAT_DTO_ERR_LOCAL_EP"),
        (
            d::DAT_DTO_ERR_LOCAL_PROTECTION,
            "DAT_DTO_ERR_LOCAL_PROTECTION",
        ),
        (d::DAT_DTO_ERR_BAD_RESPONSE, "DAT_DTO_ERR_BAD_RESPONSE"),
        (d::DAT_DTO_ERR_REMOTE_ACCESS, "DAT_DTO_ERR_REMOTE_ACCESS"),
        (
            d::DAT_DTO_ERR_REMOTE_RESPONDER,
            "DAT_DTO_ERR_REMOTE_RESPONDER",
        ),
        (d::DAT_DTO_ERR_TRANSPORT, "DAT_DTO_ERR_TRANSPORT"),
        (
            d::DAT_DTO_ERR_RECEIVER_NOT_READY,
            "DAT_DTO_ERR_RECEIVER_NOT_READY",
        ),
    ];
    names
        .iter()
        .find(|(v, _)| *v == s)
        .map(|(_, n)| n.to_string())
        .unwrap_or_else(|| format!("status({s})"))
}

fn state_name(s: u32) -> String {
    let names = [
        (d::DAT_EP_STATE_UNCONNECTED, "UNCONNECTED"),
        (
            d::DAT_EP_STATE_ACTIVE_CONNECTION_PENDING,
            "ACTIVE_CONNECTION_PENDING",
        ),
        (d::DAT_EP_STATE_CONNECTED, "CONNECTED"),
        (d::DAT_EP_STATE_DISCONNECT_PENDING, "DISCONNECT_PENDING"),
        (d::DAT_EP_STATE_DISCONNECTED, "DISCONNECTED"),
        (d::DAT_EP_STATE_COMPLETION_PENDING, "COMPLETION_PENDING"),
    ];
    names
        .iter()
        .find(|(v, _)| *v == s)
        .map(|(_, n)| format!("DAT_EP_STATE_{n}"))
        .unwrap_or_else(|| format!("state({s})"))
}

#[derive(Default)]
struct Report {
    failed: u32,
}

impl Report {
    fn line(&mut self, case: &str, expected: &str, got: &str, pass: bool) {
        if !pass {
            self.failed += 1;
        }
        println!(
            "CASE {case} expected={expected} got={got} {}",
            if pass { "PASS" } else { "FAIL" }
        );
        let _ = std::io::stdout().flush();
    }

    /// A call's DAT_RETURN against the code the man page names.
    fn code(&mut self, case: &str, expected: u32, got: u32) {
        self.line(case, &code_name(expected), &code_name(got), expected == got);
    }

    fn event(&mut self, case: &str, expected: u32, got: Option<u32>) {
        let g = got.map_or("no event".to_string(), event_name);
        self.line(case, &event_name(expected), &g, got == Some(expected));
    }

    fn status(&mut self, case: &str, expected: u32, got: Option<u32>) {
        let g = got.map_or("no completion".to_string(), status_name);
        self.line(case, &status_name(expected), &g, got == Some(expected));
    }

    fn state(&mut self, case: &str, expected: u32, got: Result<u32, u32>) {
        let g = match got {
            Ok(s) => state_name(s),
            Err(e) => code_name(e),
        };
        self.line(case, &state_name(expected), &g, got == Ok(expected));
    }

    fn check(&mut self, case: &str, expected: &str, got: &str) {
        self.line(case, expected, got, expected == got);
    }
}

const fn err(ty: u32, sub: u32) -> u32 {
    d::dat_error(ty, sub)
}

const fn arg(n: u32) -> u32 {
    err(d::DAT_INVALID_PARAMETER, d::DAT_INVALID_ARG1 + n - 1)
}

// ---- the consumer's objects ----------------------------------------------------------------

const PRIV_ALL: u32 = d::DAT_MEM_PRIV_ALL_FLAG;
const MSG: usize = 4096;
const PAGE: usize = 4096;
/// Bytes of the target region the server advertises.
const TARGET_LEN: usize = 16 * PAGE;
/// What the server's guard pages and untouchable regions hold.
const GUARD: u8 = 0xa5;
const UNTOUCHED: u8 = 0x5a;
/// The target's last bytes: no case writes them legitimately.
const TAIL: usize = PAGE;

/// IA, PZ and EVDs of one process.
struct Ctx {
    ia: Handle,
    pz: Handle,
    dto: Handle,
    conn: Handle,
    cr: Handle,
}

fn must(what: &str, rc: u32) -> Result<(), String> {
    if rc == d::DAT_SUCCESS {
        Ok(())
    } else {
        Err(format!("{what}: {}", code_name(rc)))
    }
}

impl Ctx {
    fn open(name: &str) -> Result<Ctx, String> {
        let (mut ia, mut async_evd) = (Handle::NULL, Handle::NULL);
        must(
            "dat_ia_open",
            c::ia_open(name, 8, Some(&mut async_evd), Some(&mut ia)),
        )?;
        let mut pz = Handle::NULL;
        must("dat_pz_create", c::pz_create(ia, Some(&mut pz)))?;
        let evd = |flags: u32| -> Result<Handle, String> {
            let mut h = Handle::NULL;
            must(
                "dat_evd_create",
                c::evd_create(ia, 1024, flags, Some(&mut h)),
            )?;
            Ok(h)
        };
        let dto = evd(d::DAT_EVD_DTO_FLAG)?;
        let conn = evd(d::DAT_EVD_CONNECTION_FLAG)?;
        let cr = evd(d::DAT_EVD_CR_FLAG)?;
        Ok(Ctx {
            ia,
            pz,
            dto,
            conn,
            cr,
        })
    }

    fn ep(&self, attr: Option<c::EpAttr>) -> Result<Handle, String> {
        let mut ep = Handle::NULL;
        must(
            "dat_ep_create",
            c::ep_create(
                self.ia,
                self.pz,
                self.dto,
                self.dto,
                self.conn,
                attr,
                Some(&mut ep),
            ),
        )?;
        Ok(ep)
    }

    /// An LMR of this context's PZ over all of `region`.
    fn lmr(&self, region: &'static Region) -> Result<c::Lmr, String> {
        c::lmr_create(self.ia, self.pz, region, 0, region.len(), PRIV_ALL)
            .map_err(|e| format!("dat_lmr_create: {}", code_name(e)))
    }

    /// The next connection event within `t`.
    fn conn_event(&self, t: Duration) -> Option<(u32, Vec<u8>)> {
        match c::evd_wait(self.conn, t.as_micros() as u32, true) {
            Ok(Event::Connection {
                number,
                private_data,
                ..
            }) => Some((number, private_data)),
            Ok(Event::Other(n)) => Some((n, Vec::new())),
            _ => None,
        }
    }

    /// The next DTO completion within `t`: (cookie, status, length).
    fn dto_event(&self, t: Duration) -> Option<(u64, u32, u32)> {
        match c::evd_wait(self.dto, t.as_micros() as u32, true) {
            Ok(Event::Dto {
                cookie,
                status,
                len,
                ..
            }) => Some((cookie, status, len)),
            _ => None,
        }
    }
}

fn attr(recv: i32, request: i32, iov: i32) -> c::EpAttr {
    c::EpAttr {
        max_recv_dtos: recv,
        max_request_dtos: request,
        max_recv_iov: iov,
        max_request_iov: iov,
    }
}

const T: Duration = Duration::from_secs(30);

// ---- local --------------------------------------------------------------------------------

fn local(name: &str, nobody: Ipv4Addr, r: &mut Report) -> Result<(), String> {
    let x = Ctx::open(name)?;
    let inv = |sub| err(d::DAT_INVALID_HANDLE, sub);
    let lmr = x.lmr(Region::new(MSG, 0))?;
    let one = [lmr.seg(0, 64)];

    // Handles: NULL, unissued, freed, forged, of the wrong type.
    r.code(
        "null_ep_post_send",
        inv(d::DAT_INVALID_HANDLE_EP),
        c::ep_post_send(Handle::NULL, Some(&one), 1, 1, 0),
    );
    r.code(
        "unissued_ia_pz_create",
        inv(d::DAT_INVALID_HANDLE_IA),
        c::pz_create(Handle::unissued_ia(77), Some(&mut scratch())),
    );
    let mut pz = Handle::NULL;
    must("dat_pz_create", c::pz_create(x.ia, Some(&mut pz)))?;
    must("dat_pz_free", c::pz_free(pz))?;
    r.code(
        "freed_pz_free",
        inv(d::DAT_INVALID_HANDLE_PZ),
        c::pz_free(pz),
    );
    let ep = x.ep(None)?;
    let forged = Forged::of(ep).ok_or("forge")?;
    r.code(
        "forged_ep_post_recv",
        inv(d::DAT_INVALID_HANDLE_EP),
        c::ep_post_recv(forged.handle(), Some(&one), 1, 1, 0),
    );
    r.code(
        "forged_ep_free",
        inv(d::DAT_INVALID_HANDLE_EP),
        c::ep_free(forged.handle()),
    );
    r.code(
        "pz_as_ep_post_send",
        inv(d::DAT_INVALID_HANDLE_EP),
        c::ep_post_send(x.pz, Some(&one), 1, 1, 0),
    );
    r.code(
        "evd_as_pz_free",
        inv(d::DAT_INVALID_HANDLE_PZ),
        c::pz_free(x.dto),
    );
    r.code(
        "lmr_as_ep_free",
        inv(d::DAT_INVALID_HANDLE_EP),
        c::ep_free(lmr.handle),
    );
    let freed = x.ep(None)?;
    must("dat_ep_free", c::ep_free(freed))?;
    r.code(
        "freed_ep_post_recv",
        inv(d::DAT_INVALID_HANDLE_EP),
        c::ep_post_recv(freed, Some(&one), 1, 1, 0),
    );
    r.code(
        "freed_ep_free",
        inv(d::DAT_INVALID_HANDLE_EP),
        c::ep_free(freed),
    );
    r.code(
        "freed_ep_connect",
        inv(d::DAT_INVALID_HANDLE_EP),
        c::ep_connect(freed, nobody, 4000, INFINITE, &[]),
    );
    let spare = x.lmr(Region::new(PAGE, 0))?;
    must("dat_lmr_free", c::lmr_free(spare.handle))?;
    r.code(
        "freed_lmr_free",
        inv(d::DAT_INVALID_HANDLE_LMR),
        c::lmr_free(spare.handle),
    );
    let mut psp = Handle::NULL;
    must(
        "dat_psp_create",
        c::psp_create(x.ia, 4001, x.cr, Some(&mut psp)),
    )?;
    must("dat_psp_free", c::psp_free(psp))?;
    r.code(
        "freed_psp_free",
        inv(d::DAT_INVALID_HANDLE_PSP),
        c::psp_free(psp),
    );
    r.code(
        "freed_ep_get_handle_type",
        err(d::DAT_INVALID_HANDLE, 0),
        c::get_handle_type(freed, Some(&mut 0)),
    );

    // NULL out-pointers: DAT_INVALID_PARAMETER naming the argument.
    r.code("null_pz_out", arg(2), c::pz_create(x.ia, None));
    r.code(
        "null_evd_out",
        arg(5),
        c::evd_create(x.ia, 8, d::DAT_EVD_DTO_FLAG, None),
    );
    r.code(
        "null_ep_out",
        arg(7),
        c::ep_create(x.ia, x.pz, x.dto, x.dto, x.conn, None, None),
    );
    r.code(
        "null_psp_out",
        arg(5),
        c::psp_create(x.ia, 9999, x.cr, None),
    );
    r.code(
        "null_handle_type_out",
        arg(2),
        c::get_handle_type(x.pz, None),
    );
    r.code(
        "null_event_evd_wait",
        arg(4),
        c::evd_wait(x.dto, 0, false).err().unwrap_or(d::DAT_SUCCESS),
    );
    r.code(
        "null_iov_post_recv",
        arg(3),
        c::ep_post_recv(ep, None, 1, 1, 0),
    );

    // Wrong sizes and depths on an UNCONNECTED EP (receives may be posted before connecting,
    // dat_ep_post_recv(3DAT)).
    let small = x.ep(Some(attr(4, 4, 2)))?;
    let three = [one[0], one[0], one[0]];
    r.code(
        "post_recv_too_many_iovs",
        arg(2),
        c::ep_post_recv(small, Some(&three), 3, 1, 0),
    );
    r.code(
        "post_recv_negative_count",
        arg(2),
        c::ep_post_recv(small, Some(&one), -1, 1, 0),
    );
    let mut pz2 = Handle::NULL;
    must("dat_pz_create", c::pz_create(x.ia, Some(&mut pz2)))?;
    let other = Region::new(MSG, 0);
    let lmr2 = c::lmr_create(x.ia, pz2, other, 0, MSG, PRIV_ALL).map_err(code_name)?;
    r.code(
        "post_recv_lmr_of_other_pz",
        err(d::DAT_PROTECTION_VIOLATION, d::DAT_PROTECTION_WRITE),
        c::ep_post_recv(small, Some(&[lmr2.seg(0, 64)]), 1, 1, 0),
    );
    r.code(
        "post_recv_unconnected_allowed",
        d::DAT_SUCCESS,
        c::ep_post_recv(small, Some(&one), 1, 10, 0),
    );
    for i in 1..4 {
        must(
            "dat_ep_post_recv",
            c::ep_post_recv(small, Some(&one), 1, 10 + i, 0),
        )?;
    }
    r.code(
        "post_recv_beyond_depth",
        err(d::DAT_INSUFFICIENT_RESOURCES, 0),
        c::ep_post_recv(small, Some(&one), 1, 99, 0),
    );

    // Posts in the wrong state.
    let unconnected = err(d::DAT_INVALID_STATE, d::DAT_INVALID_STATE_EP_UNCONNECTED);
    r.code(
        "post_send_unconnected",
        unconnected,
        c::ep_post_send(ep, Some(&one), 1, 1, 0),
    );
    let remote = lmr.remote(0, 64);
    r.code(
        "post_rdma_write_unconnected",
        unconnected,
        c::ep_post_rdma_write(ep, &one, 1, remote),
    );
    r.code(
        "post_rdma_read_unconnected",
        unconnected,
        c::ep_post_rdma_read(ep, &one, 1, remote),
    );

    // A connect nobody answers (ARP fails), with a timeout: TIMED_OUT, then DISCONNECTED.
    let lonely = x.ep(None)?;
    let start = Instant::now();
    must(
        "dat_ep_connect",
        c::ep_connect(lonely, nobody, 4000, 500_000, &[]),
    )?;
    r.event(
        "connect_timeout_nobody_answers",
        d::DAT_CONNECTION_EVENT_TIMED_OUT,
        x.conn_event(T).map(|e| e.0),
    );
    println!("INFO connect timeout 500 ms took {:?}", start.elapsed());
    r.state(
        "connect_timeout_ep_state",
        d::DAT_EP_STATE_DISCONNECTED,
        ep_state(lonely),
    );

    // The same without a timeout: ARP fails, so the request never left: UNREACHABLE.
    let lonelier = x.ep(None)?;
    must(
        "dat_ep_connect",
        c::ep_connect(lonelier, nobody, 4000, INFINITE, &[]),
    )?;
    r.event(
        "connect_nobody_answers_unreachable",
        d::DAT_CONNECTION_EVENT_UNREACHABLE,
        x.conn_event(T).map(|e| e.0),
    );
    r.state(
        "connect_nobody_answers_ep_state",
        d::DAT_EP_STATE_DISCONNECTED,
        ep_state(lonelier),
    );

    // Closing the IA with live objects (abrupt) and using it afterwards.
    let ia = x.ia;
    must("dat_ia_close", c::ia_close(ia, true))?;
    r.code(
        "closed_ia_pz_create",
        inv(d::DAT_INVALID_HANDLE_IA),
        c::pz_create(ia, Some(&mut scratch())),
    );
    Ok(())
}

// ---- server -------------------------------------------------------------------------------

/// What the server advertises in its accept private data (8 little-endian u64s).
#[derive(Clone, Copy, Debug, Default)]
struct Info {
    target: Remote,
    other_pz: Remote,
    freed: Remote,
}

impl Info {
    fn encode(&self) -> Vec<u8> {
        let mut v = Vec::new();
        for r in [self.target, self.other_pz, self.freed] {
            v.extend_from_slice(&r.addr.to_le_bytes());
            v.extend_from_slice(&r.len.to_le_bytes());
            v.extend_from_slice(&r.rmr_context.to_le_bytes());
        }
        v
    }

    fn decode(b: &[u8]) -> Option<Info> {
        let r = |i: usize| -> Option<Remote> {
            let s = b.get(i * 16..i * 16 + 16)?;
            Some(Remote {
                addr: u64::from_le_bytes(s[0..8].try_into().ok()?),
                len: u32::from_le_bytes(s[8..12].try_into().ok()?),
                rmr_context: u32::from_le_bytes(s[12..16].try_into().ok()?),
            })
        };
        Some(Info {
            target: r(0)?,
            other_pz: r(1)?,
            freed: r(2)?,
        })
    }
}

/// Receives the server keeps posted per connection.
const SERVER_RECVS: u64 = 64;

fn server(name: &str, qual: u64, connections: u32, r: &mut Report) -> Result<(), String> {
    let x = Ctx::open(name)?;
    // [guard page][target][guard page], only the target registered.
    let whole = Region::new(TARGET_LEN + 2 * PAGE, GUARD);
    whole.write(PAGE, &[UNTOUCHED; TARGET_LEN]);
    let target = c::lmr_create(x.ia, x.pz, whole, PAGE, TARGET_LEN, PRIV_ALL).map_err(code_name)?;
    // A region of another PZ, and a region registered then freed.
    let mut pz2 = Handle::NULL;
    must("dat_pz_create", c::pz_create(x.ia, Some(&mut pz2)))?;
    let other = Region::new(PAGE, UNTOUCHED);
    let other_lmr = c::lmr_create(x.ia, pz2, other, 0, PAGE, PRIV_ALL).map_err(code_name)?;
    let gone = Region::new(PAGE, UNTOUCHED);
    let gone_lmr = x.lmr(gone)?;
    must("dat_lmr_free", c::lmr_free(gone_lmr.handle))?;
    let info = Info {
        target: target.remote(0, TARGET_LEN as u32),
        other_pz: other_lmr.remote(0, PAGE as u32),
        freed: gone_lmr.remote(0, PAGE as u32),
    };
    let recv_lmr = x.lmr(Region::new(MSG * SERVER_RECVS as usize, 0))?;
    let recv_seg = |i: u64| recv_lmr.seg(i * MSG as u64, MSG as u32);
    let mut psp = Handle::NULL;
    must(
        "dat_psp_create",
        c::psp_create(x.ia, qual, x.cr, Some(&mut psp)),
    )?;
    println!("READY");
    let _ = std::io::stdout().flush();
    let mut n = 0u32;
    loop {
        let cr = match c::evd_wait(x.cr, INFINITE, true) {
            Ok(Event::ConnectionRequest { cr }) => cr,
            Ok(e) => return Err(format!("CR EVD: {e:?}")),
            Err(e) => return Err(format!("dat_evd_wait(CR): {}", code_name(e))),
        };
        n += 1;
        let ep = x.ep(Some(attr(SERVER_RECVS as i32, 16, 4)))?;
        for i in 0..SERVER_RECVS {
            must(
                "dat_ep_post_recv",
                c::ep_post_recv(ep, Some(&[recv_seg(i)]), 1, i, 0),
            )?;
        }
        must("dat_cr_accept", c::cr_accept(cr, ep, &info.encode()))?;
        // Serve until the connection ends: repost every receive.
        let mut outstanding = SERVER_RECVS;
        let mut ended = false;
        let mut received = 0u64;
        let mut errors = std::collections::BTreeMap::<String, u32>::new();
        while !ended || outstanding > 0 {
            if let Ok(Event::Dto { cookie, status, .. }) = c::evd_wait(x.dto, 20_000, true) {
                outstanding -= 1;
                if status != d::DAT_DTO_SUCCESS {
                    *errors.entry(status_name(status)).or_default() += 1;
                }
                if status == d::DAT_DTO_SUCCESS && !ended {
                    received += 1;
                    if c::ep_post_recv(ep, Some(&[recv_seg(cookie)]), 1, cookie, 0)
                        == d::DAT_SUCCESS
                    {
                        outstanding += 1;
                    }
                }
            }
            while let Ok(e) = c::evd_dequeue(x.conn) {
                if let Event::Connection { number, .. } = e {
                    if number == d::DAT_CONNECTION_EVENT_DISCONNECTED
                        || number == d::DAT_CONNECTION_EVENT_BROKEN
                    {
                        ended = true;
                    }
                }
            }
        }
        println!("INFO connection {n} ended after {received} receives, errors {errors:?}");
        // Nothing outside registered memory changed, nor the target's tail (no case writes
        // it legitimately), nor the other PZ's or the freed region.
        let changed = |b: Vec<u8>, v: u8| b.iter().filter(|&&x| x != v).count();
        let bad = changed(whole.read(0, PAGE), GUARD)
            + changed(whole.read(PAGE + TARGET_LEN, PAGE), GUARD)
            + changed(whole.read(PAGE + TARGET_LEN - TAIL, TAIL), UNTOUCHED)
            + changed(other.read(0, PAGE), UNTOUCHED)
            + changed(gone.read(0, PAGE), UNTOUCHED);
        r.check(
            &format!("server_memory_intact_after_connection_{n}"),
            "0 bytes changed",
            &format!("{bad} bytes changed"),
        );
        must("dat_ep_free", c::ep_free(ep))?;
        if connections != 0 && n >= connections {
            return Ok(());
        }
    }
}

// ---- client -------------------------------------------------------------------------------

const ESTABLISHED: u32 = d::DAT_CONNECTION_EVENT_ESTABLISHED;
const BROKEN: u32 = d::DAT_CONNECTION_EVENT_BROKEN;
const EP_CONNECTED: u32 = d::DAT_EP_STATE_CONNECTED;
const EP_DISCONNECTED: u32 = d::DAT_EP_STATE_DISCONNECTED;
const SUCCESS: u32 = d::DAT_DTO_SUCCESS;
const FLUSHED: u32 = d::DAT_DTO_ERR_FLUSHED;

/// A new EP connected to the server, and what the server's private data advertises.
fn connect(
    x: &Ctx,
    server: Ipv4Addr,
    qual: u64,
    attr: Option<c::EpAttr>,
) -> Result<(Handle, Info), String> {
    let ep = x.ep(attr)?;
    must(
        "dat_ep_connect",
        c::ep_connect(ep, server, qual, INFINITE, &[]),
    )?;
    match x.conn_event(T) {
        Some((n, pd)) if n == ESTABLISHED => {
            Ok((ep, Info::decode(&pd).ok_or("short accept private data")?))
        }
        other => Err(format!(
            "connect: {}",
            other.map_or("no event".into(), |e| event_name(e.0))
        )),
    }
}

/// Disconnects `ep` if it is still connected, drains its completions and frees it.
fn close(x: &Ctx, ep: Handle) -> Result<(), String> {
    if ep_state(ep) == Ok(EP_CONNECTED) {
        must("dat_ep_disconnect", c::ep_disconnect(ep, true))?;
        let _ = x.conn_event(T);
    }
    while x.dto_event(Duration::from_millis(100)).is_some() {}
    must("dat_ep_free", c::ep_free(ep))
}

/// The completion of the one DTO just posted (None when none came within `T`).
fn completion(x: &Ctx) -> Option<u32> {
    x.dto_event(T).map(|e| e.1)
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed))
        .collect()
}

const VERIFIED: &str = "256 bytes written, read back equal, send completed";

/// RDMA write of a pattern to the start of the server's target, RDMA read back, compared;
/// then a send. `Ok(description)` of what moved.
fn verified_traffic(
    x: &Ctx,
    ep: Handle,
    info: &Info,
    local: &c::Lmr,
    seed: u8,
) -> Result<String, String> {
    let data = pattern(256, seed);
    let region_off = 0u64;
    local_region_write(local, region_off, &data);
    let dst = Remote {
        len: 256,
        ..info.target
    };
    must(
        "dat_ep_post_rdma_write",
        c::ep_post_rdma_write(ep, &[local.seg(0, 256)], 1, dst),
    )?;
    let s = completion(x);
    if s != Some(SUCCESS) {
        return Err(format!(
            "RDMA write: {}",
            s.map_or("none".into(), status_name)
        ));
    }
    must(
        "dat_ep_post_rdma_read",
        c::ep_post_rdma_read(ep, &[local.seg(PAGE as u64, 256)], 2, dst),
    )?;
    let s = completion(x);
    if s != Some(SUCCESS) {
        return Err(format!(
            "RDMA read: {}",
            s.map_or("none".into(), status_name)
        ));
    }
    let back = local_region_read(local, PAGE as u64, 256);
    if back != data {
        return Err("RDMA read returned other bytes than written".into());
    }
    must(
        "dat_ep_post_send",
        c::ep_post_send(ep, Some(&[local.seg(0, 64)]), 1, 3, 0),
    )?;
    let s = completion(x);
    if s != Some(SUCCESS) {
        return Err(format!("send: {}", s.map_or("none".into(), status_name)));
    }
    Ok(VERIFIED.into())
}

/// The client's local buffer (registered whole by `Ctx::lmr`).
static LOCAL: std::sync::OnceLock<&'static Region> = std::sync::OnceLock::new();

fn local_region() -> &'static Region {
    LOCAL.get_or_init(|| Region::new(4 * PAGE, 0))
}

fn local_region_write(lmr: &c::Lmr, off: u64, data: &[u8]) {
    let r = local_region();
    r.write((lmr.addr - r.addr() + off) as usize, data);
}

fn local_region_read(lmr: &c::Lmr, off: u64, len: usize) -> Vec<u8> {
    let r = local_region();
    r.read((lmr.addr - r.addr() + off) as usize, len)
}

/// A DTO that must break the connection: its completion status, the connection event, the
/// EP's state, then the EP is freed.
fn breaking_case(
    x: &Ctx,
    r: &mut Report,
    case: &str,
    expected_status: u32,
    ep: Handle,
    post: impl FnOnce() -> u32,
) -> Result<(), String> {
    let rc = post();
    if rc != d::DAT_SUCCESS {
        r.code(&format!("{case}.post"), d::DAT_SUCCESS, rc);
    } else {
        r.status(&format!("{case}.status"), expected_status, completion(x));
        r.event(
            &format!("{case}.event"),
            BROKEN,
            x.conn_event(T).map(|e| e.0),
        );
        r.state(&format!("{case}.state"), EP_DISCONNECTED, ep_state(ep));
    }
    close(x, ep)
}

fn client(name: &str, server: Ipv4Addr, qual: u64, r: &mut Report) -> Result<(), String> {
    let x = Ctx::open(name)?;
    let local = x.lmr(local_region())?;
    let mut pz2 = Handle::NULL;
    must("dat_pz_create", c::pz_create(x.ia, Some(&mut pz2)))?;
    let other =
        c::lmr_create(x.ia, pz2, Region::new(PAGE, 0), 0, PAGE, PRIV_ALL).map_err(code_name)?;
    let freed = x.lmr(Region::new(PAGE, 0))?;
    must("dat_lmr_free", c::lmr_free(freed.handle))?;

    // One connection for the cases that are refused at the call and do not break it.
    let (ep, info) = connect(&x, server, qual, Some(attr(8, 4, 2)))?;
    let got = verified_traffic(&x, ep, &info, &local, 1).unwrap_or_else(|e| e);
    r.check("baseline_traffic", VERIFIED, &got);
    let seg = local.seg(0, 64);
    r.code(
        "post_send_too_many_iovs",
        arg(2),
        c::ep_post_send(ep, Some(&[seg, seg, seg]), 3, 1, 0),
    );
    r.code(
        "post_send_lmr_of_other_pz",
        err(d::DAT_PROTECTION_VIOLATION, d::DAT_PROTECTION_READ),
        c::ep_post_send(ep, Some(&[other.seg(0, 64)]), 1, 1, 0),
    );
    r.code(
        "post_send_null_iov",
        arg(3),
        c::ep_post_send(ep, None, 1, 1, 0),
    );
    for i in 0..4 {
        must(
            "dat_ep_post_send",
            c::ep_post_send(ep, Some(&[seg]), 1, 100 + i, 0),
        )?;
    }
    r.code(
        "post_send_beyond_request_depth",
        err(d::DAT_INSUFFICIENT_RESOURCES, 0),
        c::ep_post_send(ep, Some(&[seg]), 1, 104, 0),
    );
    let done: Vec<u32> = (0..4).filter_map(|_| completion(&x)).collect();
    r.check(
        "post_send_beyond_request_depth.completions",
        "4 x DAT_DTO_SUCCESS",
        &if done.iter().all(|&s| s == SUCCESS) {
            format!("{} x DAT_DTO_SUCCESS", done.len())
        } else {
            format!(
                "{:?}",
                done.iter().map(|&s| status_name(s)).collect::<Vec<_>>()
            )
        },
    );
    r.state(
        "still_connected_after_refused_posts",
        EP_CONNECTED,
        ep_state(ep),
    );
    close(&x, ep)?;

    // RDMA to memory the server did not register for it: each breaks its connection.
    let bad: [(&str, bool, Remote); 7] = [
        (
            "rdma_write_unregistered_rkey",
            true,
            Remote {
                rmr_context: info.target.rmr_context ^ 0x5a5a_0000,
                len: 64,
                ..info.target
            },
        ),
        (
            "rdma_write_freed_rkey",
            true,
            Remote {
                len: 64,
                ..info.freed
            },
        ),
        (
            "rdma_write_other_pz_rkey",
            true,
            Remote {
                len: 64,
                ..info.other_pz
            },
        ),
        (
            "rdma_write_out_of_bounds",
            true,
            Remote {
                addr: info.target.addr + u64::from(info.target.len) - 16,
                len: 64,
                ..info.target
            },
        ),
        (
            "rdma_write_wrapping_address",
            true,
            Remote {
                addr: u64::MAX - 15,
                len: 64,
                ..info.target
            },
        ),
        (
            "rdma_read_unregistered_rkey",
            false,
            Remote {
                rmr_context: info.target.rmr_context ^ 0x5a5a_0000,
                len: 64,
                ..info.target
            },
        ),
        (
            "rdma_read_out_of_bounds",
            false,
            Remote {
                addr: info.target.addr + u64::from(info.target.len) - 16,
                len: 64,
                ..info.target
            },
        ),
    ];
    for (case, write, remote) in bad {
        let (ep, _) = connect(&x, server, qual, None)?;
        breaking_case(&x, r, case, d::DAT_DTO_ERR_REMOTE_ACCESS, ep, || {
            if write {
                c::ep_post_rdma_write(ep, &[local.seg(0, 64)], 7, remote)
            } else {
                c::ep_post_rdma_read(ep, &[local.seg(0, 64)], 7, remote)
            }
        })?;
    }

    // Local segments the provider cannot use: reported in the completion (the provider checks
    // them when the request is processed), and the connection breaks.
    let local_bad: [(&str, Segment); 3] = [
        (
            "post_send_segment_longer_than_lmr",
            Segment {
                len: local.len + 1,
                ..local.seg(0, 0)
            },
        ),
        (
            "post_send_unknown_lmr_context",
            Segment {
                lmr_context: local.lmr_context ^ 0x5a5a_0000,
                ..local.seg(0, 64)
            },
        ),
        ("post_send_freed_lmr", freed.seg(0, 64)),
    ];
    for (case, seg) in local_bad {
        let (ep, _) = connect(&x, server, qual, None)?;
        breaking_case(&x, r, case, d::DAT_DTO_ERR_LOCAL_PROTECTION, ep, || {
            c::ep_post_send(ep, Some(&[seg]), 1, 9, 0)
        })?;
    }

    // A message longer than the receive buffer the peer posted (4096 bytes): the peer's
    // receive completes with DAT_DTO_ERR_LOCAL_LENGTH and NAKs (invalid request), the send
    // completes with DAT_DTO_ERR_REMOTE_RESPONDER.
    // The peer breaks its end too (its receive failed), so whichever side's teardown arrives
    // first decides between BROKEN (ours) and DISCONNECTED (the peer's DREQ).
    let (ep, _) = connect(&x, server, qual, None)?;
    must(
        "dat_ep_post_send",
        c::ep_post_send(ep, Some(&[local.seg(0, 2 * MSG as u32)]), 1, 11, 0),
    )?;
    r.status(
        "send_longer_than_peer_receive.status",
        d::DAT_DTO_ERR_REMOTE_RESPONDER,
        completion(&x),
    );
    let ev = x.conn_event(T).map(|e| e.0);
    let either = [BROKEN, d::DAT_CONNECTION_EVENT_DISCONNECTED];
    r.line(
        "send_longer_than_peer_receive.event",
        "DAT_CONNECTION_EVENT_BROKEN|DAT_CONNECTION_EVENT_DISCONNECTED",
        &ev.map_or("no event".into(), event_name),
        ev.is_some_and(|e| either.contains(&e)),
    );
    r.state(
        "send_longer_than_peer_receive.state",
        EP_DISCONNECTED,
        ep_state(ep),
    );
    // Posts in the wrong state: requests on the DISCONNECTED EP.
    r.code(
        "post_send_disconnected",
        err(d::DAT_INVALID_STATE, d::DAT_INVALID_STATE_EP_DISCONNECTED),
        c::ep_post_send(ep, Some(&[local.seg(0, 64)]), 1, 12, 0),
    );
    r.code(
        "post_rdma_write_disconnected",
        err(d::DAT_INVALID_STATE, d::DAT_INVALID_STATE_EP_DISCONNECTED),
        c::ep_post_rdma_write(ep, &[local.seg(0, 64)], 13, info.target),
    );
    close(&x, ep)?;

    // A connection qualifier nobody listens on: the remote provider rejects.
    let ep = x.ep(None)?;
    must(
        "dat_ep_connect",
        c::ep_connect(ep, server, qual + 1, INFINITE, &[]),
    )?;
    r.event(
        "connect_no_listener",
        d::DAT_CONNECTION_EVENT_NON_PEER_REJECTED,
        x.conn_event(T).map(|e| e.0),
    );
    r.state("connect_no_listener.state", EP_DISCONNECTED, ep_state(ep));
    close(&x, ep)?;

    // And the server still serves.
    let (ep, info) = connect(&x, server, qual, None)?;
    let got = verified_traffic(&x, ep, &info, &local, 2).unwrap_or_else(|e| e);
    r.check("traffic_after_bad_input", VERIFIED, &got);
    close(&x, ep)
}

// ---- stream (the peer is killed) ------------------------------------------------------------

const STREAM_RECVS: u64 = 32;
const STREAM_WINDOW: u64 = 48;
const RECV_BIT: u64 = 1 << 63;

fn stream(name: &str, server: Ipv4Addr, qual: u64, r: &mut Report) -> Result<(), String> {
    let x = Ctx::open(name)?;
    let local = x.lmr(local_region())?;
    let rbufs = x.lmr(Region::new(MSG * STREAM_RECVS as usize, 0))?;
    let (ep, info) = connect(&x, server, qual, Some(attr(STREAM_RECVS as i32, 64, 2)))?;
    let (mut posted_req, mut posted_recv) = (0u64, 0u64);
    let mut done_req = std::collections::BTreeMap::<String, u64>::new();
    let mut done_recv = std::collections::BTreeMap::<String, u64>::new();
    let (mut n_req, mut n_recv) = (0u64, 0u64);
    for i in 0..STREAM_RECVS {
        must(
            "dat_ep_post_recv",
            c::ep_post_recv(
                ep,
                Some(&[rbufs.seg(i * MSG as u64, MSG as u32)]),
                1,
                RECV_BIT | i,
                0,
            ),
        )?;
        posted_recv += 1;
    }
    let mut ok = 0u64;
    let mut streaming = false;
    let mut first_error: Option<u32> = None;
    let mut after_first_error_not_flushed = 0u64;
    let mut event: Option<u32> = None;
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut k = 0u64;
    loop {
        let outstanding = (posted_req - n_req) + (posted_recv - n_recv);
        if event.is_some() && outstanding == 0 {
            break;
        }
        if Instant::now() > deadline {
            break;
        }
        // Keep the window full while the connection is up.
        while first_error.is_none() && event.is_none() && posted_req - n_req < STREAM_WINDOW {
            let rc = if k.is_multiple_of(2) {
                c::ep_post_send(ep, Some(&[local.seg(0, MSG as u32)]), 1, k, 0)
            } else {
                let off = (k / 2 % 8) * MSG as u64;
                c::ep_post_rdma_write(
                    ep,
                    &[local.seg(0, MSG as u32)],
                    k,
                    Remote {
                        addr: info.target.addr + off,
                        len: MSG as u32,
                        ..info.target
                    },
                )
            };
            if rc != d::DAT_SUCCESS {
                break;
            }
            posted_req += 1;
            k += 1;
        }
        if let Some((cookie, status, _)) = x.dto_event(Duration::from_millis(20)) {
            let name = status_name(status);
            if cookie & RECV_BIT != 0 {
                n_recv += 1;
                *done_recv.entry(name).or_default() += 1;
            } else {
                n_req += 1;
                *done_req.entry(name).or_default() += 1;
            }
            if status == SUCCESS {
                ok += 1;
            } else if first_error.is_none() {
                first_error = Some(status);
            } else if status != FLUSHED {
                after_first_error_not_flushed += 1;
            }
        }
        if !streaming && ok >= 200 {
            streaming = true;
            println!("STREAMING");
            let _ = std::io::stdout().flush();
        }
        while let Ok(e) = c::evd_dequeue(x.conn) {
            if let Event::Connection { number, .. } = e {
                event.get_or_insert(number);
            }
        }
    }
    r.event("peer_killed.connection_event", BROKEN, event);
    r.check(
        "peer_killed.no_completion_lost",
        &format!("{posted_req} requests and {posted_recv} receives completed"),
        &format!("{n_req} requests and {n_recv} receives completed"),
    );
    println!(
        "INFO requests {done_req:?} receives {done_recv:?} first error {:?}",
        first_error.map(status_name)
    );
    let recv_flushed = done_recv.get("DAT_DTO_ERR_FLUSHED").copied().unwrap_or(0);
    r.check(
        "peer_killed.outstanding_flushed",
        "every completion after the first error DAT_DTO_ERR_FLUSHED, all receives flushed",
        &if after_first_error_not_flushed == 0 && recv_flushed == posted_recv && first_error.is_some() {
            "every completion after the first error DAT_DTO_ERR_FLUSHED, all receives flushed".to_string()
        } else {
            format!(
                "{after_first_error_not_flushed} not flushed after the first error, {recv_flushed} of {posted_recv} receives flushed"
            )
        },
    );
    r.state("peer_killed.state", EP_DISCONNECTED, ep_state(ep));
    must("dat_ep_free", c::ep_free(ep))?;
    println!("BROKEN");
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .map_err(|e| format!("stdin: {e}"))?;
    // The test started a new server: connect again and move verified data.
    let (ep, info) = connect(&x, server, qual, None)?;
    let got = verified_traffic(&x, ep, &info, &local, 3).unwrap_or_else(|e| e);
    r.check("reconnect_after_peer_killed", VERIFIED, &got);
    close(&x, ep)
}

fn main() -> ExitCode {
    let args = Args::parse();
    let mut r = Report::default();
    let res = match args.role {
        Role::Local { nobody } => local(&args.ia, nobody, &mut r),
        Role::Server { qual, connections } => server(&args.ia, qual, connections, &mut r),
        Role::Client { server, qual } => client(&args.ia, server, qual, &mut r),
        Role::Stream { server, qual } => stream(&args.ia, server, qual, &mut r),
    };
    if let Err(e) = res {
        println!("ERROR {e}");
        return ExitCode::FAILURE;
    }
    println!("RESULT {} failed", r.failed);
    if r.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// An out-parameter whose value the case ignores.
fn scratch() -> Handle {
    Handle::NULL
}
