//! `roce-lat --api dat-rust`: the client's iterations through the provider's DAT-shaped Rust
//! API (`dpdk_roce::dat`: `Ia`, `Ep`, `Evd`), against the same Rust server. It has the EP, the
//! EVD rings and the inline progress of `--api dat` without libdat2 and the C layer, so beside
//! `--api rust` and `--api dat` in one spell it splits what the DAT path costs between the
//! model and the C front end. RDMA READ and the lone WRITE completion (`write-completion`:
//! post, then `Evd::dequeue` until its event).

use super::*;
use dpdk_roce::dat::{
    CompletionFlags, ConnectionEventKind, DatError, DatEvent, Ep, EpAttr, Evd, EvdFlags, Ia, Lmr,
    Pz, RmrTriplet,
};
use dpdk_roce::mem::access::Access;

fn dat(what: &str) -> impl Fn(DatError) -> String + '_ {
    move |e| format!("{what}: {e}")
}

/// Dequeues `evd` until the completion of `cookie` (an error status is an error).
fn wait_completion(evd: &Evd, cookie: u64, timeout: Duration) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    let mut n = 0u32;
    loop {
        match evd.dequeue() {
            Ok(DatEvent::Dto(c)) if c.cookie == cookie && c.status == WcStatus::Success => {
                return Ok(())
            }
            Ok(other) => return Err(format!("waiting for {cookie}: {other:?}")),
            Err(DatError::QueueEmpty) => {}
            Err(e) => return Err(format!("Evd::dequeue: {e}")),
        }
        n = n.wrapping_add(1);
        if n.is_multiple_of(CLOCK_EVERY) && Instant::now() > deadline {
            return Err(format!("timed out waiting for completion {cookie}"));
        }
    }
}

pub(crate) fn client(args: &Args) -> Result<(), String> {
    if !matches!(args.op, Op::WriteCompletion | Op::Read)
        || args.raw
        || args.with_raw
        || args.payload.verify
        || args.stages
    {
        return Err("--api dat-rust measures read and write-completion \
                    (no --raw, --with-raw, --verify or --stages)"
            .into());
    }
    let server_ip = args.peer.server_ip.ok_or("--client needs --server-ip")?;
    let timeout = Duration::from_millis(args.timeout_ms);
    let profile = Profile::load_with_env(&args.profile).map_err(|e| e.to_string())?;
    let ia = Ia::open(&profile).map_err(dat("Ia::open"))?;
    let pz = Pz::create(&ia).map_err(dat("Pz::create"))?;
    let dto = Evd::create(&ia, 64, EvdFlags::DTO).map_err(dat("Evd::create"))?;
    let conn = Evd::create(&ia, 64, EvdFlags::CONNECTION).map_err(dat("Evd::create"))?;
    let rights = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    let src = Lmr::create(&pz, MAX_SIZE, rights).map_err(dat("Lmr::create"))?;
    let dst = Lmr::create(&pz, MAX_SIZE, rights).map_err(dat("Lmr::create"))?;
    let attr = EpAttr {
        max_recv_dtos: 8,
        max_request_dtos: 64,
        max_recv_iov: 1,
        max_request_iov: 1,
        ..EpAttr::default()
    };
    let ep = Ep::create(
        &ia,
        &pz,
        Some(&dto),
        Some(&dto),
        Some(&conn),
        None,
        Some(attr),
    )
    .map_err(dat("Ep::create"))?;
    // What the Rust client sends: its destination buffer (address, R_Key, length).
    let mut pdata = Vec::with_capacity(16);
    pdata.extend_from_slice(&dst.address().to_be_bytes());
    pdata.extend_from_slice(&dst.rmr_context().to_be_bytes());
    pdata.extend_from_slice(&(dst.length() as u32).to_be_bytes());
    ep.connect_with_timeout(server_ip, args.peer.port, &pdata, Some(timeout))
        .map_err(dat("Ep::connect"))?;
    let (peer_addr, peer_rkey) = match conn.wait(Some(timeout), 1) {
        Ok(DatEvent::Connection {
            kind: ConnectionEventKind::Established,
            private_data,
            ..
        }) => decode_buffer(&private_data)?,
        other => return Err(format!("connecting: {other:?}")),
    };
    eprintln!("connected through the Rust DAT API");
    let mut series = Vec::new();
    let sizes = sizes(args);
    let progress = Progress::sizes(sizes.len());
    for size in progress.wrap(sizes) {
        let mut s = LatencySeries::new(size, Scale::Full);
        let remote = RmrTriplet {
            rmr_context: peer_rkey,
            target_address: peer_addr,
            segment_length: size as u32,
        };
        for i in 1..=args.warmup + args.iters {
            let cookie = i as u64;
            let t0 = Instant::now();
            match args.op {
                Op::WriteCompletion => ep.post_rdma_write_with(
                    &[src.triplet(0, size as u32)],
                    &remote,
                    cookie,
                    CompletionFlags::DEFAULT,
                ),
                _ => ep.post_rdma_read_with(
                    &[dst.triplet(0, size as u32)],
                    &remote,
                    cookie,
                    CompletionFlags::DEFAULT,
                ),
            }
            .map_err(dat("post"))?;
            wait_completion(&dto, cookie, timeout)?;
            if i > args.warmup {
                s.record(t0.elapsed().as_nanos() as u64);
            }
        }
        series.push(s);
    }
    // The server ends on the disconnect.
    ep.disconnect().map_err(dat("Ep::disconnect"))?;
    let _ = conn.wait(Some(timeout), 1);
    while dto.dequeue().is_ok() {}
    drop((ep, src, dst, dto, conn, pz));
    let _ = ia.close();
    report(
        args,
        args.op.label(),
        "hugepage LMR (Rust DAT API)",
        &series,
    )
}
