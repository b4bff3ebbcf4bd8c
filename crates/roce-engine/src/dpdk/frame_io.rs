//! A DPDK RX/TX queue pair as a shard's [`FrameIo`]: bursts into fixed arrays, one mbuf per
//! frame on transmit, batched `tx_burst` on flush. Also opens the port a profile names.

use super::pinned_tx::{SlotPool, TX_OFFLOAD_MULTI_SEGS};
use super::{DpdkError, Eal, Mbuf, Mempool, Port, PortConfig, RxQueue, TxQueue};
use crate::config::{MemifRole, PortDriver, Profile};
use crate::io::{Built, FrameBuf, FrameIo, IoStats, PinnedFrame, RxInterrupt};
use crate::net::{Received, Vlan, TAG_LEN};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Makes TX pool names unique within the process (DPDK mempool names are global).
static TX_POOL_SEQ: AtomicU32 = AtomicU32::new(0);

/// Payloads below this many bytes are copied into the frame's one mbuf rather than attached as
/// external buffers: attaching costs an mbuf per segment plus one for the trailer and a free
/// callback, which for small payloads exceeds the copy. Chosen from a measured sweep (RDMA
/// WRITE over net_af_packet, copy against zero-copy, 64 B..64 KiB, three runs each; figures
/// in bench/README.md): single-packet messages of 64..1024 B were as fast or faster copied
/// (median of the three p50s); from 2 KiB messages (1 KiB packets at the vdevs' path MTU) the
/// two were level at p50 and zero-copy had fewer multi-millisecond p99 tails. So only
/// full-sized packets of the vdevs' path MTU (1024) and larger go zero-copy.
pub const ZERO_COPY_MIN_PAYLOAD: usize = 1024;

/// PMDs that copy every segment of a transmitted frame into memory of their own (net_memif
/// copies each mbuf segment into its shared-memory ring): attaching payloads as external
/// buffers only adds chain segments there, so their queues copy by default. Measured with
/// `roce-bw -s 65536 -t 16` over memif, three alternated rounds (bench/README.md): RDMA WRITE
/// 39.3 / 37.6 Gb/s zero-copy against 49.5 / 51.5 copied, RDMA READ 36.2 / 35.8 / 22.0 against
/// 52.1 / 51.5 / 52.3.
const COPYING_PMDS: [&str; 1] = ["net_memif"];

/// Frames per burst.
pub const BURST: usize = 32;

/// One queue pair of a started port.
pub struct DpdkFrameIo {
    queue: u16,
    rx: RxQueue,
    tx: TxQueue,
    pool: Mempool,
    rx_slots: [Option<Mbuf>; BURST],
    /// Slots of `rx_slots` that may still hold mbufs (see `RxQueue::rx_burst_after`).
    rx_dirty: usize,
    tx_slots: [Option<Mbuf>; BURST],
    pending: usize,
    /// Mbufs allocated a burst at a time for the frames to come (`tx_stash[..stashed]`).
    tx_stash: [Option<Mbuf>; BURST],
    stashed: usize,
    /// Frame bytes of a multi-segment receive, reassembled.
    scratch: Vec<u8>,
    /// External-buffer slots for zero-copy payloads.
    slots: Arc<SlotPool>,
    /// Smallest payload sent zero-copy; `None` when the PMD cannot send chained mbufs.
    zero_copy_min: Option<usize>,
    /// The port's 802.1Q identity: frames are tagged on the way out and untagged on the way in
    /// (`net::vlan`).
    vlan: Option<Vlan>,
    pub stats: IoStats,
}

/// Appends `frame` to `m`, with `vlan`'s tag when there is one; `false` when it does not fit.
fn put_frame(m: &mut Mbuf, vlan: Option<&Vlan>, frame: &[u8]) -> bool {
    let Some(vlan) = vlan else {
        return m.extend_from_slice(frame);
    };
    let Ok(len) = u16::try_from(frame.len() + TAG_LEN) else {
        return false;
    };
    m.append(len)
        .is_some_and(|out| vlan.write_tagged(frame, out))
}

/// A frame built straight into a fresh mbuf (`FrameIo::tx_build`), `TAG_LEN` bytes in on a
/// tagged port so the tag goes in without a second copy (`Vlan::tag_in_place`).
struct MbufFrame {
    m: Mbuf,
    at: usize,
}

impl MbufFrame {
    /// Drops what a build wrote (the mbuf is fresh again); false if it cannot.
    fn clear(&mut self) -> bool {
        let had = self.m.data_len();
        had == 0 || self.m.trim(had)
    }
}

impl FrameBuf for MbufFrame {
    fn sized(&mut self, len: usize) -> Option<&mut [u8]> {
        let total = u16::try_from(len + self.at).ok()?;
        // Sized again after a frame that could not be built: start from empty.
        if !self.clear() {
            return None;
        }
        let at = self.at;
        self.m.append(total).map(|b| &mut b[at..])
    }

    fn bytes(&self) -> &[u8] {
        self.m.data().get(self.at..).unwrap_or(&[])
    }
}

impl Drop for DpdkFrameIo {
    fn drop(&mut self) {
        // The stash and any unsent frames go back to the pool before it is dropped (the
        // fields after this body), so it is freed, not leaked as still in use.
        Mbuf::free_bulk(&mut self.tx_stash);
        Mbuf::free_bulk(&mut self.tx_slots);
        // Mbufs still queued in the device reference slots; DPDK may release them after this
        // queue is gone, so the pool must outlive them.
        if self.slots.in_flight() > 0 {
            std::mem::forget(self.slots.clone());
        }
    }
}

impl DpdkFrameIo {
    /// Queue pair 0 of `port`, transmitting from a pool of `tx_mbufs` mbufs.
    pub fn new(eal: &Eal, port: &Port, tx_mbufs: u32) -> Result<Self, DpdkError> {
        Self::on_queue(eal, port, 0, tx_mbufs)
    }

    /// Queue pair `queue` of `port` (RX queue `queue` and TX queue `queue`, each taken once),
    /// transmitting from a pool of `tx_mbufs` mbufs of its own. One per shard gives every
    /// shard its own RX/TX queue pair (docs/DESIGN.md "The engine").
    pub fn on_queue(eal: &Eal, port: &Port, queue: u16, tx_mbufs: u32) -> Result<Self, DpdkError> {
        let (rx, tx) = port.take_queue_pair(queue)?;
        let seq = TX_POOL_SEQ.fetch_add(1, Ordering::Relaxed);
        let pool = Mempool::new(
            eal,
            &format!("tx{}.{queue}.{seq}", port.id()),
            tx_mbufs,
            256,
            Mempool::DEFAULT_DATA_ROOM,
        )?;
        let multi_seg = port.tx_offload_capa()? & TX_OFFLOAD_MULTI_SEGS != 0;
        let copies_anyway = COPYING_PMDS.contains(&port.driver_name()?.as_str());
        Ok(DpdkFrameIo {
            queue,
            rx,
            tx,
            pool,
            rx_slots: std::array::from_fn(|_| None),
            rx_dirty: 0,
            tx_slots: std::array::from_fn(|_| None),
            tx_stash: std::array::from_fn(|_| None),
            stashed: 0,
            pending: 0,
            scratch: Vec::new(),
            slots: SlotPool::new(tx_mbufs),
            zero_copy_min: (multi_seg && !copies_anyway).then_some(ZERO_COPY_MIN_PAYLOAD),
            vlan: port.vlan(),
            stats: IoStats::default(),
        })
    }

    /// The queue pair's index on its port.
    pub fn queue(&self) -> u16 {
        self.queue
    }

    /// Sets the smallest payload sent zero-copy (`None`: always copy), also on a PMD that
    /// copies by default (`COPYING_PMDS`). Ignored (always copy) when the PMD does not
    /// advertise multi-segment transmit.
    pub fn set_zero_copy_min(&mut self, min: Option<usize>, port: &Port) -> Result<(), DpdkError> {
        let multi_seg = port.tx_offload_capa()? & TX_OFFLOAD_MULTI_SEGS != 0;
        self.zero_copy_min = min.filter(|_| multi_seg);
        Ok(())
    }

    /// External buffers attached and not yet released by the PMD.
    pub fn zero_copy_in_flight(&self) -> usize {
        self.slots.in_flight()
    }

    /// An empty mbuf for a frame: from the stash, which is refilled a burst at a time
    /// (`rte_pktmbuf_alloc_bulk`: one call per burst, not per frame); one at a time when the
    /// pool cannot spare a burst.
    fn fresh_mbuf(&mut self) -> Option<Mbuf> {
        if self.stashed == 0 {
            if !self.pool.alloc_bulk(&mut self.tx_stash) {
                return self.pool.alloc();
            }
            self.stashed = BURST;
        }
        self.stashed -= 1;
        self.tx_stash[self.stashed].take()
    }

    /// Makes room in the burst; false when the device queue stays full.
    fn room(&mut self) -> bool {
        if self.pending == BURST {
            self.flush();
        }
        self.pending < BURST
    }

    /// Builds the chain header mbuf + one attached mbuf per pinned segment + trailer mbuf.
    /// Every pin not attached is unpinned here; attached ones are unpinned by DPDK's free
    /// callback (also when the chain is dropped unsent).
    fn chain_pinned(&mut self, frame: &mut PinnedFrame<'_>) -> Option<Mbuf> {
        let mut head = self.pool.alloc()?;
        if !put_frame(&mut head, self.vlan.as_ref(), frame.headers) {
            return None;
        }
        let table = frame.table;
        let mut tokens = frame.segments.drain(..);
        for token in tokens.by_ref() {
            let Some(mut m) = self.pool.alloc() else {
                table.unpin(token);
                break;
            };
            if let Err(token) = self.slots.attach(&mut m, token, table) {
                table.unpin(token);
                break;
            }
            if head.chain(m).is_err() {
                break;
            }
        }
        // Whatever is left (after a failure) is released now; a failure leaves the chain short.
        let mut failed = false;
        for token in tokens {
            table.unpin(token);
            failed = true;
        }
        let mut tail = self.pool.alloc()?;
        if failed || !tail.extend_from_slice(frame.trailer) || head.chain(tail).is_err() {
            return None;
        }
        Some(head)
    }
}

impl FrameIo for DpdkFrameIo {
    fn rx_burst(&mut self, f: &mut dyn FnMut(&[u8])) -> usize {
        // The slots are emptied below; only a burst cut short (a panicking callback) leaves
        // some filled, and `rx_dirty` then makes the next burst free them.
        let n = self.rx.rx_burst_after(&mut self.rx_slots, self.rx_dirty);
        self.rx_dirty = n;
        let vlan = self.vlan;
        for slot in self.rx_slots.iter_mut().take(n) {
            let Some(m) = slot.as_mut() else { continue };
            let received = match m.stripped_vlan_tci() {
                Some(tci) if Vlan::accepts(vlan.as_ref(), tci) => Received::Untagged,
                Some(_) => Received::Foreign,
                None => Vlan::classify(vlan.as_ref(), m.data()),
            };
            let tagged = match received {
                Received::Untagged => false,
                Received::Tagged => true,
                Received::Foreign => {
                    self.stats.rx_other_vlan += 1;
                    continue;
                }
            };
            if m.nb_segs() > 1 {
                self.scratch.clear();
                for seg in m.segments() {
                    self.scratch.extend_from_slice(seg);
                }
                let at = if tagged {
                    Vlan::strip_in_place(&mut self.scratch)
                } else {
                    0
                };
                f(&self.scratch[at..]);
            } else if !tagged {
                f(m.data());
            } else if let Some(data) = m.data_mut() {
                let at = Vlan::strip_in_place(data);
                f(&data[at..]);
            } else {
                // Shared memory lent by the PMD (read-only): untag a copy.
                Vlan::strip_into(m.data(), &mut self.scratch);
                f(&self.scratch);
            }
        }
        // The burst's mbufs go back to the pool together.
        Mbuf::free_bulk(&mut self.rx_slots[..n]);
        self.rx_dirty = 0;
        self.stats.rx_frames += n as u64;
        n
    }

    fn tx(&mut self, frame: &[u8]) -> bool {
        if self.pending == BURST {
            self.flush();
            if self.pending == BURST {
                self.stats.tx_dropped += 1;
                return false;
            }
        }
        let Some(mut m) = self.fresh_mbuf() else {
            self.stats.tx_dropped += 1;
            return false;
        };
        if !put_frame(&mut m, self.vlan.as_ref(), frame) {
            self.stats.tx_dropped += 1;
            return false;
        }
        self.tx_slots[self.pending] = Some(m);
        self.pending += 1;
        true
    }

    /// Straight into a fresh mbuf: the frame is not copied after it is built. An mbuf whose
    /// build found no frame goes back to the stash.
    fn tx_build(
        &mut self,
        scratch: &mut Vec<u8>,
        build: &mut dyn FnMut(&mut dyn FrameBuf) -> bool,
    ) -> Built {
        let mbuf = if self.room() { self.fresh_mbuf() } else { None };
        let Some(m) = mbuf else {
            // No room or no mbuf: the frame is built and dropped, as `tx` drops it.
            if !build(scratch) {
                return Built::Nothing;
            }
            self.stats.tx_dropped += 1;
            return Built::Dropped;
        };
        let at = if self.vlan.is_some() { TAG_LEN } else { 0 };
        let mut frame = MbufFrame { m, at };
        if !build(&mut frame) {
            if frame.clear() {
                self.tx_stash[self.stashed] = Some(frame.m);
                self.stashed += 1;
            }
            return Built::Nothing;
        }
        let MbufFrame { mut m, .. } = frame;
        if let Some(vlan) = self.vlan.as_ref() {
            if !m.data_mut().is_some_and(|b| vlan.tag_in_place(b)) {
                self.stats.tx_dropped += 1;
                return Built::Dropped;
            }
        }
        self.tx_slots[self.pending] = Some(m);
        self.pending += 1;
        Built::Queued
    }

    fn zero_copy_min(&self) -> Option<usize> {
        self.zero_copy_min
    }

    fn tx_pinned(&mut self, mut frame: PinnedFrame<'_>) -> bool {
        if self.zero_copy_min.is_none() {
            self.stats.tx_gathered += 1;
            frame.gather_into(&mut self.scratch);
            frame.unpin_all();
            let buf = std::mem::take(&mut self.scratch);
            let ok = self.tx(&buf);
            self.scratch = buf;
            return ok;
        }
        if !self.room() {
            frame.unpin_all();
            self.stats.tx_dropped += 1;
            return false;
        }
        let expected = frame.len() + if self.vlan.is_some() { TAG_LEN } else { 0 };
        let chain = self.chain_pinned(&mut frame);
        frame.unpin_all();
        match chain {
            Some(m) if m.pkt_len() as usize == expected => {
                self.tx_slots[self.pending] = Some(m);
                self.pending += 1;
                self.stats.tx_zero_copy += 1;
                true
            }
            _ => {
                self.stats.tx_dropped += 1;
                false
            }
        }
    }

    fn flush(&mut self) {
        if self.pending == 0 {
            return;
        }
        // A few tries: a full TX ring drains within microseconds. What is still unsent stays
        // queued, in order, for the next flush; `ready` tells the shard to build no more.
        let mut sent = 0;
        for _ in 0..4 {
            sent += self.tx.tx_burst(&mut self.tx_slots[sent..self.pending]);
            if sent == self.pending {
                break;
            }
        }
        self.tx_slots[..self.pending].rotate_left(sent);
        self.stats.tx_frames += sent as u64;
        self.pending -= sent;
    }

    fn ready(&mut self) -> bool {
        self.room()
    }

    fn tx_pending(&self) -> bool {
        self.pending > 0
    }

    fn rx_other_vlan(&self) -> u64 {
        self.stats.rx_other_vlan
    }

    fn rx_interrupt(&self) -> Option<Box<dyn RxInterrupt>> {
        self.rx
            .interrupt()
            .map(|i| Box::new(i) as Box<dyn RxInterrupt>)
    }
}

/// EAL initialised and the port of `profile` started with the profile's queues
/// (`port.rx_queues` / `port.tx_queues`; net_af_packet also gets them as its `qpairs` device
/// argument, net_tap and net_memif take the count from `rte_eth_dev_configure`).
///
/// The EAL runtime directory of the profile's file prefix (`/var/run/dpdk/<file prefix>`) holds
/// only DPDK's telemetry socket (`dpdk_telemetry.v2`), since profiles run EAL with
/// `--no-shconf` unless `eal.multi_process` is on. With telemetry on (`eal.telemetry`, the
/// default) the directory stays while the process runs, as EAL and its telemetry thread do, and
/// goes when the process exits normally (returns from `main`, calls `exit`; an `atexit`
/// handler): a process that ends normally leaves nothing under /var/run/dpdk, also when it never
/// dropped its port (a DAT program that exits without `dat_ia_close`). A killed process leaves
/// it, like any DPDK program; the next EAL of the same prefix takes it over. With telemetry off
/// the directory goes right after `rte_eal_init`.
///
/// With `eal.multi_process` the directory also holds EAL's shared configuration, and the
/// hugepage files (`<hugetlbfs>/<file prefix>map_<n>`) stay mapped from files: a secondary
/// process attaches (Debian's `dpdk-dumpcap --file-prefix=<prefix>` captures the port, served by
/// `rte_pdump_init`). Both go at a normal exit; a killed process leaves them, hugepages included.
///
/// The port itself stays open for the life of the process, like EAL (see `open_ports`): a
/// second `open` of the same device, concurrent or after the first was dropped, gets the same
/// started port, and takes its queues again once their earlier handles are gone.
pub struct ProfilePort {
    pub eal: &'static Eal,
    pub port: Port,
    runtime_dirs: Vec<std::path::PathBuf>,
    /// EAL's telemetry runs or its shared config is kept: the runtime directory stays until
    /// the process exits.
    keep_runtime_dir: bool,
    /// The peer's exit tears down rings this process polls (net_memif): see
    /// [`wait_peer_gone`](Self::wait_peer_gone).
    peer_owns_rings: bool,
}

impl Drop for ProfilePort {
    fn drop(&mut self) {
        // The telemetry socket and a multi-process EAL's shared config live as long as EAL
        // (the process): their directory goes at exit, so that an IA opened again later is
        // still readable.
        if !self.keep_runtime_dir {
            remove_dirs(&self.runtime_dirs);
        }
    }
}

fn remove_dirs(dirs: &[std::path::PathBuf]) {
    for d in dirs {
        if d.is_dir() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// The hugepage files EAL made for file prefix `prefix` (`<hugetlbfs mount>/<prefix>map_<n>`,
/// `eal_get_hugefile_path`) in every hugetlbfs mount.
pub fn hugepage_files(prefix: &str) -> Vec<std::path::PathBuf> {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let start = format!("{prefix}map_");
    mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let dir = f.nth(1)?;
            (f.next()? == "hugetlbfs").then(|| std::path::PathBuf::from(dir))
        })
        .filter_map(|dir| std::fs::read_dir(dir).ok())
        .flatten()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_prefix(&start))
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(|e| e.path())
        .collect()
}

/// Where EAL may keep the runtime files of `prefix`: /var/run/dpdk for root, else
/// $XDG_RUNTIME_DIR/dpdk or /tmp/dpdk, or systemd's $RUNTIME_DIRECTORY/dpdk. The prefix carries
/// the pid, so only ours match.
fn runtime_dirs(prefix: &str) -> Vec<std::path::PathBuf> {
    let mut bases = vec![std::path::PathBuf::from("/var/run"), "/tmp".into()];
    for var in ["XDG_RUNTIME_DIR", "RUNTIME_DIRECTORY"] {
        if let Some(x) = std::env::var_os(var) {
            bases.push(x.into());
        }
    }
    bases
        .into_iter()
        .map(|b| b.join("dpdk").join(prefix))
        .collect()
}

/// The directory under which EAL 22.11 makes the runtime directory of each file prefix, as it
/// chooses it (`eal_create_runtime_dir`): `$RUNTIME_DIRECTORY/dpdk` (systemd), else
/// `/var/run/dpdk` for root, else `$XDG_RUNTIME_DIR/dpdk` or `/tmp/dpdk`. A running process's
/// telemetry socket is `<this>/<file prefix>/dpdk_telemetry.v2`.
pub fn runtime_base() -> std::path::PathBuf {
    let base = std::env::var_os("RUNTIME_DIRECTORY").map(std::path::PathBuf::from);
    // SAFETY: getuid has no preconditions and cannot fail.
    let root = unsafe { libc::getuid() } == 0;
    base.unwrap_or_else(|| {
        if root {
            "/var/run".into()
        } else {
            std::env::var_os("XDG_RUNTIME_DIR")
                .map(Into::into)
                .unwrap_or_else(|| "/tmp".into())
        }
    })
    .join("dpdk")
}

/// Runtime directories and hugepage file prefixes to remove when the process exits, and the
/// process that registered them (a child forked without `exec` runs the parent's `atexit`
/// handlers too: it must not remove the parent's files).
struct AtExit {
    pid: u32,
    dirs: Vec<std::path::PathBuf>,
    hugepage_prefixes: Vec<String>,
}

static AT_EXIT: Mutex<Option<AtExit>> = Mutex::new(None);

/// Removes `dirs` when the process exits normally (`exit`, a return from `main`), and the
/// hugepage files of EAL file prefix `hugepages` (a multi-process EAL's).
fn remove_at_exit(dirs: &[std::path::PathBuf], hugepages: Option<&str>) {
    let mut at_exit = AT_EXIT.lock().unwrap_or_else(|e| e.into_inner());
    let first = at_exit.is_none();
    let entry = at_exit.get_or_insert_with(|| AtExit {
        pid: std::process::id(),
        dirs: Vec::new(),
        hugepage_prefixes: Vec::new(),
    });
    for d in dirs {
        if !entry.dirs.contains(d) {
            entry.dirs.push(d.clone());
        }
    }
    if let Some(p) = hugepages.filter(|p| !entry.hugepage_prefixes.iter().any(|q| q == p)) {
        entry.hugepage_prefixes.push(p.to_owned());
    }
    if first {
        // SAFETY: registers a function without arguments that never unwinds (it catches
        // panics) and touches only this module's state; glibc calls it once, in `exit`. The
        // provider library is linked `-z nodelete` (build.rs), so the code outlives `dlclose`.
        let ret = unsafe { libc::atexit(remove_dirs_at_exit) };
        if ret != 0 {
            tracing::warn!(target: "dpdk_roce::dpdk::frame_io", "atexit failed: the EAL runtime directory stays after exit");
        }
    }
}

extern "C" fn remove_dirs_at_exit() {
    let _ = std::panic::catch_unwind(|| {
        // Another thread may hold the lock while the process exits: skip rather than hang.
        let at_exit = match AT_EXIT.try_lock() {
            Ok(a) => a,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return,
        };
        if let Some(a) = at_exit.as_ref().filter(|a| a.pid == std::process::id()) {
            remove_dirs(&a.dirs);
            for prefix in &a.hugepage_prefixes {
                for file in hugepage_files(prefix) {
                    let _ = std::fs::remove_file(file);
                }
            }
        }
    });
}

/// The ports started by [`ProfilePort::open`] in this process, by device name.
///
/// They are never closed. A vdev's ethdev is released by `rte_eth_dev_close` while its device
/// stays probed on the vdev bus, so opening it again would take `rte_dev_remove` plus
/// `rte_dev_probe`: a new PACKET_MMAP socket and fanout group for net_af_packet (whose group id
/// can collide), a re-created kernel interface for net_tap (its link goes down and loses its
/// configuration), a new connection for net_memif. A DAT consumer that closes its IA and opens it
/// again (dapltest does so between test cases), or opens it several times at once, must get the
/// same port back instead; keeping it started costs only its RX rings. The OS reclaims it at
/// exit, as it does EAL.
fn open_ports() -> &'static Mutex<HashMap<String, Port>> {
    static PORTS: OnceLock<Mutex<HashMap<String, Port>>> = OnceLock::new();
    PORTS.get_or_init(|| Mutex::new(HashMap::new()))
}

impl ProfilePort {
    /// Initialises EAL from the profile (once per process) and starts its port, or returns the
    /// port an earlier `open` of the same device started (which must have the same queues).
    pub fn open(profile: &Profile) -> Result<ProfilePort, DpdkError> {
        // A memif server killed earlier leaves its socket file behind, and a new server then
        // fails with "Address already in use": the server owns the path, so it removes it.
        if let PortDriver::Memif {
            socket,
            role: MemifRole::Server,
            socket_abstract: false,
            ..
        } = &profile.port.driver
        {
            if std::fs::symlink_metadata(socket)
                .is_ok_and(|m| std::os::unix::fs::FileTypeExt::is_socket(&m.file_type()))
            {
                let _ = std::fs::remove_file(socket);
            }
            if let Some(dir) = socket.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
        }
        // EAL makes the runtime directory early in `rte_eal_init` and leaves it when a later
        // step fails (no hugepage information, no memory, a device that does not probe).
        let eal = Eal::init(&profile.eal_args())
            .inspect_err(|_| remove_dirs(&runtime_dirs(&profile.file_prefix())))?;
        // Without multi-process (`Profile::eal_args`: --no-shconf) EAL has no multi-process
        // channel and no shared config: the runtime directory holds only the telemetry
        // socket. Without telemetry it goes now, so even a killed process leaves nothing;
        // with it, at exit (see the type's documentation). A multi-process EAL keeps its
        // shared config there and its hugepage files in hugetlbfs for secondary processes
        // until the process exits.
        let dirs = runtime_dirs(&profile.file_prefix());
        if profile.eal.multi_process {
            eal.enable_pdump()?;
            remove_at_exit(&dirs, Some(&profile.file_prefix()));
        } else if profile.eal.telemetry {
            remove_at_exit(&dirs, None);
        } else {
            remove_dirs(&dirs);
        }
        let cfg = PortConfig {
            rx_queues: profile.port.rx_queues,
            tx_queues: profile.port.tx_queues,
            rx_desc: profile.port.rx_descriptors,
            tx_desc: profile.port.tx_descriptors,
            mbufs_per_rx_queue: profile.port.mbuf_pool_size,
            vlan: profile.roce.vlan,
            // Neighbor Discovery solicits an IPv6 address at its solicited-node group.
            allmulticast: profile.roce.address.v6.is_some(),
            ..PortConfig::default()
        };
        let name = profile.port.device_name();
        let mut ports = open_ports().lock().unwrap_or_else(|e| e.into_inner());
        let port = match ports.get(&name) {
            Some(port) => {
                let want = (cfg.rx_queues, cfg.tx_queues);
                if port.vlan() != cfg.vlan {
                    return Err(DpdkError::InvalidArgument(format!(
                        "{name} is already open with VLAN {:?}, not {:?}",
                        port.vlan(),
                        cfg.vlan
                    )));
                }
                if port.queue_counts() != want {
                    return Err(DpdkError::InvalidArgument(format!(
                        "{name} is already open with {:?} (rx, tx) queues, not {want:?}",
                        port.queue_counts()
                    )));
                }
                port.clone()
            }
            None => {
                let port = Port::open(eal, &name, &cfg)?;
                ports.insert(name, port.clone());
                port
            }
        };
        drop(ports);
        Ok(ProfilePort {
            eal,
            port,
            runtime_dirs: dirs,
            keep_runtime_dir: profile.eal.telemetry || profile.eal.multi_process,
            peer_owns_rings: matches!(profile.port.driver, PortDriver::Memif { .. }),
        })
    }

    /// The frame I/O of an engine with `shards` shards: one queue pair per shard (shard i on
    /// queue pair i) when the port has at least that many, otherwise queue pair 0 alone (shard
    /// 0 then receives for all and relays the others' frames). Each TX pool has `tx_mbufs`.
    pub fn frame_ios(&self, shards: usize, tx_mbufs: u32) -> Result<Vec<DpdkFrameIo>, DpdkError> {
        let pairs = usize::from(self.port.queue_pairs());
        let n = if shards > 1 && pairs >= shards {
            shards
        } else {
            1
        };
        (0..n)
            .map(|q| DpdkFrameIo::on_queue(self.eal, &self.port, q as u16, tx_mbufs))
            .collect()
    }

    /// Waits until the link is up (a memif client until its server answers, a tap until the
    /// kernel side is up), at most `timeout`. Returns whether it came up.
    pub fn wait_link_up(&self, timeout: std::time::Duration) -> bool {
        self.wait_link(true, timeout)
    }

    /// Waits until the link is `up` (or down), checking every millisecond, at most `timeout`.
    fn wait_link(&self, up: bool, timeout: std::time::Duration) -> bool {
        let t0 = std::time::Instant::now();
        loop {
            if self.port.link(false).is_ok_and(|l| l.up == up) {
                return true;
            }
            if t0.elapsed() > timeout {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// For the side of a point-to-point link that ends last: waits, without polling the port,
    /// until the peer has gone (at most `timeout`), so that no receive burst runs while the
    /// peer's exit is handled. net_memif handles a peer's disconnect in the EAL interrupt
    /// thread, which unmaps the shared rings (`memif_disconnect` -> `memif_free_regions`)
    /// while the polling thread may be inside `rte_eth_rx_burst` on them: a crash. Its link
    /// goes down when the peer has gone. On every other PMD the kernel stands between the
    /// two processes and this returns at once. Returns whether the peer is known to be gone
    /// (always true off net_memif).
    pub fn wait_peer_gone(&self, timeout: std::time::Duration) -> bool {
        if !self.peer_owns_rings {
            return true;
        }
        if !self.wait_link(false, timeout) {
            return false;
        }
        // The link goes down first in `memif_disconnect`; the rings are unmapped after a few
        // system calls. Let the interrupt thread finish before the caller goes on (to exit, or
        // to poll a reconnected port).
        std::thread::sleep(PEER_GONE_SETTLE);
        true
    }
}

/// How long [`ProfilePort::wait_peer_gone`] waits after the link went down.
const PEER_GONE_SETTLE: std::time::Duration = std::time::Duration::from_millis(20);
