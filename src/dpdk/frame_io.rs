//! A DPDK RX/TX queue pair as a shard's [`FrameIo`]: bursts into fixed arrays, one mbuf per
//! frame on transmit, batched `tx_burst` on flush. Also opens the port a profile names.

use super::{DpdkError, Eal, Mbuf, Mempool, Port, PortConfig, RxQueue, TxQueue};
use crate::config::{MemifRole, PortDriver, Profile};
use crate::engine::io::{FrameIo, IoStats};

/// Frames per burst.
pub const BURST: usize = 32;

/// One queue pair of a started port.
pub struct DpdkFrameIo {
    rx: RxQueue,
    tx: TxQueue,
    pool: Mempool,
    rx_slots: [Option<Mbuf>; BURST],
    tx_slots: [Option<Mbuf>; BURST],
    pending: usize,
    /// Frame bytes of a multi-segment receive, reassembled.
    scratch: Vec<u8>,
    pub stats: IoStats,
}

impl DpdkFrameIo {
    /// Queue pair 0 of `port`, transmitting from a pool of `tx_mbufs` mbufs.
    pub fn new(eal: &Eal, port: &Port, tx_mbufs: u32) -> Result<Self, DpdkError> {
        let (rx, tx) = port.take_queue_pair(0)?;
        let pool = Mempool::new(
            eal,
            &format!("tx{}_{}", port.id(), std::process::id() % 100_000),
            tx_mbufs,
            256,
            Mempool::DEFAULT_DATA_ROOM,
        )?;
        Ok(DpdkFrameIo {
            rx,
            tx,
            pool,
            rx_slots: std::array::from_fn(|_| None),
            tx_slots: std::array::from_fn(|_| None),
            pending: 0,
            scratch: Vec::new(),
            stats: IoStats::default(),
        })
    }
}

impl FrameIo for DpdkFrameIo {
    fn rx_burst(&mut self, f: &mut dyn FnMut(&[u8])) -> usize {
        let n = self.rx.rx_burst(&mut self.rx_slots);
        for slot in self.rx_slots.iter_mut().take(n) {
            let Some(m) = slot.take() else { continue };
            if m.nb_segs() == 1 {
                f(m.data());
            } else {
                self.scratch.clear();
                for seg in m.segments() {
                    self.scratch.extend_from_slice(seg);
                }
                f(&self.scratch);
            }
        }
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
        let Some(mut m) = self.pool.alloc() else {
            self.stats.tx_dropped += 1;
            return false;
        };
        if !m.extend_from_slice(frame) {
            self.stats.tx_dropped += 1;
            return false;
        }
        self.tx_slots[self.pending] = Some(m);
        self.pending += 1;
        true
    }

    fn flush(&mut self) {
        if self.pending == 0 {
            return;
        }
        // A few tries: a full TX ring drains within microseconds; what is still unsent after
        // that is dropped (and recovered by RC retransmission).
        let mut sent = 0;
        for _ in 0..64 {
            sent += self.tx.tx_burst(&mut self.tx_slots[sent..self.pending]);
            if sent == self.pending {
                break;
            }
        }
        for slot in self.tx_slots[sent..self.pending].iter_mut() {
            if slot.take().is_some() {
                self.stats.tx_dropped += 1;
            }
        }
        self.stats.tx_frames += sent as u64;
        self.pending = 0;
    }
}

/// EAL initialised and the port of `profile` started, with one queue pair. Dropping it closes
/// the port and removes the EAL runtime directory of the profile's file prefix, so a process
/// leaves nothing under /var/run/dpdk.
pub struct ProfilePort {
    pub eal: &'static Eal,
    pub port: Port,
    runtime_dirs: Vec<std::path::PathBuf>,
}

impl Drop for ProfilePort {
    fn drop(&mut self) {
        for d in &self.runtime_dirs {
            if d.is_dir() {
                let _ = std::fs::remove_dir_all(d);
            }
        }
    }
}

/// Where EAL may keep the runtime files of `prefix`: /var/run/dpdk for root, else
/// $XDG_RUNTIME_DIR/dpdk or /tmp/dpdk. The prefix carries the pid, so only ours match.
fn runtime_dirs(prefix: &str) -> Vec<std::path::PathBuf> {
    let mut bases = vec![std::path::PathBuf::from("/var/run"), "/tmp".into()];
    if let Some(x) = std::env::var_os("XDG_RUNTIME_DIR") {
        bases.push(x.into());
    }
    bases
        .into_iter()
        .map(|b| b.join("dpdk").join(prefix))
        .collect()
}

impl ProfilePort {
    /// Initialises EAL from the profile (once per process) and starts its port.
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
        let eal = Eal::init(&profile.eal_args())?;
        let cfg = PortConfig {
            rx_queues: 1,
            tx_queues: 1,
            rx_desc: profile.port.rx_descriptors,
            tx_desc: profile.port.tx_descriptors,
            mbufs_per_rx_queue: profile.port.mbuf_pool_size,
            ..PortConfig::default()
        };
        let port = Port::open(eal, &profile.port.device_name(), &cfg)?;
        Ok(ProfilePort {
            eal,
            port,
            runtime_dirs: runtime_dirs(&profile.file_prefix()),
        })
    }

    /// Waits until the link is up (a memif client until its server answers, a tap until the
    /// kernel side is up), at most `timeout`. Returns whether it came up.
    pub fn wait_link_up(&self, timeout: std::time::Duration) -> bool {
        let t0 = std::time::Instant::now();
        loop {
            if self.port.link(false).is_ok_and(|l| l.up) {
                return true;
            }
            if t0.elapsed() > timeout {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}
