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
//! * `sink`, `hold`, `verify`: a peer that dies (SIGKILL) mid-stream or during set-up (`death`).
//! * `stream --server IP --qual Q`: a long stream of sends and RDMA writes with receives
//!   posted; prints `STREAMING` once data moves. The test kills the server (SIGKILL); the
//!   stream must end with a broken connection and every outstanding DTO completed (flushed),
//!   none lost. Prints `BROKEN`, reads one line from stdin (the test starts a new server), then
//!   connects again and moves verified data.

use clap::{Parser, Subcommand};
use dat_sys as d;
use dat_sys::consumer::{
    self as c, ep_state, strerror, Event, Forged, Handle, Region, Remote, Segment, INFINITE,
};
use std::io::Write;
use std::net::IpAddr;
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
        nobody: IpAddr,
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
        server: IpAddr,
        #[arg(long)]
        qual: u64,
    },
    /// Two EPs of this process connected through the IA's own address (`--own`).
    Loopback {
        #[arg(long)]
        own: IpAddr,
        #[arg(long)]
        qual: u64,
    },
    /// A long stream the test interrupts by killing the server.
    Stream {
        #[arg(long)]
        server: IpAddr,
        #[arg(long)]
        qual: u64,
    },
    /// The passive side of a stream whose client the test kills (see `death`).
    Sink {
        #[arg(long)]
        qual: u64,
        /// Answer every message with a send.
        #[arg(long)]
        echo: bool,
    },
    /// Takes a request, waits for stdin (the requester is killed), then accepts.
    Hold {
        #[arg(long)]
        qual: u64,
    },
    /// Connects (with a timeout) and moves verified data; reconnects after a dead server.
    Verify {
        #[arg(long)]
        server: IpAddr,
        #[arg(long)]
        qual: u64,
        #[arg(long, default_value_t = 10_000)]
        timeout_ms: u64,
    },
}

mod client;
mod ctx;
mod death;
mod local;
mod loopback;
mod report;
mod server;
mod stream;

use client::*;
use ctx::*;
use death::*;
use local::*;
use loopback::*;
use report::*;
use server::*;
use stream::*;

fn main() -> ExitCode {
    dpdk_roce::log::init_program();
    let args = Args::parse();
    let mut r = Report::default();
    let res = match args.role {
        Role::Local { nobody } => local(&args.ia, nobody, &mut r),
        Role::Server { qual, connections } => server(&args.ia, qual, connections, &mut r),
        Role::Client { server, qual } => client(&args.ia, server, qual, &mut r),
        Role::Stream { server, qual } => stream(&args.ia, server, qual, &mut r),
        Role::Loopback { own, qual } => loopback(&args.ia, own, qual, &mut r),
        Role::Sink { qual, echo } => sink(&args.ia, qual, echo, &mut r),
        Role::Hold { qual } => hold(&args.ia, qual, &mut r),
        Role::Verify {
            server,
            qual,
            timeout_ms,
        } => verify(
            &args.ia,
            server,
            qual,
            Duration::from_millis(timeout_ms),
            &mut r,
        ),
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
