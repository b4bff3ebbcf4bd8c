//! One RDMA WRITE through the Rust DAT API, start to finish: open an IA on a DPDK profile,
//! register memory, connect, write 4096 bytes into the peer's memory, wait for the
//! completion, check the bytes, disconnect, close.
//!
//! Both ends live in this one process on one port: the client EP connects to the IA's own
//! address, and the port loops frames to its own MAC back to itself. Across two ports the
//! calls are the same, each side making its half (two IAs of one process in
//! `src/bin/roce-dat-pair.rs`, two processes in `bench/roce_soak`).
//!
//! ```text
//! bash scripts/hugepages.sh up && bash scripts/veth.sh up
//! cargo run --release --example rdma_write -- dpdk-config/af_packet-a.toml
//! ```
//!
//! Prints `verified 4096 bytes` and exits 0; on any failure it says what failed and exits 1.
//! `tests/example_rdma_write.rs` runs it.

use dpdk_roce::config::Profile;
use dpdk_roce::dat::{
    ConnectionEventKind, DatError, DatEvent, Ep, Evd, EvdFlags, Ia, Lmr, Psp, Pz, RmrTriplet,
};
use dpdk_roce::mem::access::Access;
use dpdk_roce::transport::types::{WcOpcode, WcStatus};
use std::process::ExitCode;
use std::time::Duration;

/// Bytes written.
const LEN: u32 = 4096;
/// The connection qualifier the server listens on (an rdma_cm port number).
const CONN_QUAL: u16 = 7400;
/// How long any one step may take.
const TIMEOUT: Duration = Duration::from_secs(10);

fn main() -> ExitCode {
    // RUST_LOG=debug shows the provider's logs on stderr.
    dpdk_roce::log::init_program();
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: rdma_write PROFILE.toml");
        return ExitCode::FAILURE;
    };
    match run(&path) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rdma_write: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(path: &str) -> Result<(), String> {
    // The profile names the port, its address and the engine's cores (dpdk-config/README.md);
    // DPDK_ROCE_* variables override parts of it.
    let profile = Profile::load_with_env(path).map_err(|e| e.to_string())?;
    let ia = Ia::open(&profile).map_err(at("opening the IA"))?;
    let result = write_and_check(&ia);
    // Every object of the IA was dropped when `write_and_check` returned: close it.
    let closed = ia
        .close()
        .map_err(|refused| format!("closing the IA: {}", refused.error));
    result.and(closed)
}

fn write_and_check(ia: &Ia) -> Result<(), String> {
    // Memory: a protection zone, and in it the source (the write reads it: LOCAL_READ) and
    // the target (the peer writes it: REMOTE_WRITE). `Lmr::write` and `Lmr::read` are the
    // program's own accesses, which need no right.
    let pz = Pz::create(ia).map_err(at("PZ"))?;
    let source = Lmr::create(&pz, LEN as usize, Access::LOCAL_READ).map_err(at("source LMR"))?;
    let target = Lmr::create(&pz, LEN as usize, Access::REMOTE_WRITE).map_err(at("target LMR"))?;
    let pattern: Vec<u8> = (0..LEN).map(|i| (i * 7 + 1) as u8).collect();
    source
        .write(0, &pattern)
        .map_err(at("filling the source"))?;

    // Event dispatchers: completions, connection events, connection requests.
    let dto = Evd::create(ia, 16, EvdFlags::DTO).map_err(at("DTO EVD"))?;
    let conn = Evd::create(ia, 16, EvdFlags::CONNECTION).map_err(at("connection EVD"))?;
    let requests = Evd::create(ia, 4, EvdFlags::CR).map_err(at("CR EVD"))?;

    // The server listens; each side has an endpoint (default attributes, no SRQ).
    let _psp = Psp::create(ia, CONN_QUAL, &requests).map_err(at("PSP"))?;
    let new_ep = || Ep::create(ia, &pz, Some(&dto), Some(&dto), Some(&conn), None, None);
    let server = new_ep().map_err(at("server EP"))?;
    let client = new_ep().map_err(at("client EP"))?;

    // Connect. The server answers with where the client may write (the target's R_Key,
    // address and length) in the private data of its accept; the client reads it from its
    // Established event.
    client
        .connect(ia.address(), CONN_QUAL, &[])
        .map_err(at("connect"))?;
    let DatEvent::ConnectionRequest(cr) = next(&requests, "the connection request")? else {
        return Err("expected a connection request".into());
    };
    cr.accept(&server, &encode(&target.rmr_triplet(0, LEN)))
        .map_err(at("accept"))?;
    let mut remote = None;
    for _ in 0..2 {
        match next(&conn, "Established")? {
            DatEvent::Connection {
                ep,
                kind: ConnectionEventKind::Established,
                private_data,
                ..
            } if ep == client.qpn() => remote = decode(&private_data),
            DatEvent::Connection {
                kind: ConnectionEventKind::Established,
                ..
            } => {}
            other => return Err(format!("expected Established, got {other:?}")),
        }
    }
    let remote = remote.ok_or("no target in the accept's private data")?;

    // The write, and its completion on the client's request EVD.
    client
        .post_rdma_write(&[source.triplet(0, LEN)], &remote, 42)
        .map_err(at("post_rdma_write"))?;
    match next(&dto, "the write's completion")? {
        DatEvent::Dto(d)
            if d.cookie == 42
                && d.status == WcStatus::Success
                && d.opcode == WcOpcode::RdmaWrite => {}
        other => return Err(format!("expected the write's completion, got {other:?}")),
    }

    // The completion means the peer acknowledged the data. The target side makes it visible
    // to itself (dat_lmr_sync_rdma_write), then reads it.
    Lmr::sync_rdma_write(ia, &[target.triplet(0, LEN)]).map_err(at("sync"))?;
    let written = target
        .read(0, LEN as usize)
        .map_err(at("reading the target"))?;
    if written != pattern {
        let first = written.iter().zip(&pattern).position(|(a, b)| a != b);
        return Err(format!(
            "the target differs from the source (first at byte {first:?})"
        ));
    }
    println!("verified {LEN} bytes");

    // Disconnect: both EPs get Disconnected.
    client.disconnect().map_err(at("disconnect"))?;
    for _ in 0..2 {
        match next(&conn, "Disconnected")? {
            DatEvent::Connection {
                kind: ConnectionEventKind::Disconnected,
                ..
            } => {}
            other => return Err(format!("expected Disconnected, got {other:?}")),
        }
    }
    Ok(())
}

/// The next event of `evd`, or an error naming what did not come.
fn next(evd: &Evd, what: &str) -> Result<DatEvent, String> {
    evd.wait(Some(TIMEOUT), 1).map_err(|e| match e {
        DatError::TimeoutExpired => format!("{what} did not come within {TIMEOUT:?}"),
        e => format!("waiting for {what}: {e}"),
    })
}

/// An RMR triplet as 16 bytes of private data: R_Key, address, length (big endian).
fn encode(t: &RmrTriplet) -> Vec<u8> {
    let mut b = t.rmr_context.to_be_bytes().to_vec();
    b.extend(t.target_address.to_be_bytes());
    b.extend(t.segment_length.to_be_bytes());
    b
}

/// The RMR triplet [`encode`] made, from the start of `b`.
fn decode(b: &[u8]) -> Option<RmrTriplet> {
    Some(RmrTriplet {
        rmr_context: u32::from_be_bytes(b.get(0..4)?.try_into().ok()?),
        target_address: u64::from_be_bytes(b.get(4..12)?.try_into().ok()?),
        segment_length: u32::from_be_bytes(b.get(12..16)?.try_into().ok()?),
    })
}

/// Turns a DAT error into a message saying which step failed.
fn at(step: &'static str) -> impl Fn(DatError) -> String {
    move |e| format!("{step}: {e}")
}
