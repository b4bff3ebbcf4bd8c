//! `Port`: an ethdev port found by name, configured with its queues and a mempool per RX queue,
//! started; stopped and closed when the port and all its queue handles are dropped.

use std::ffi::{CStr, CString};
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use super::burst::{RxQueue, TxQueue};
use super::eal::Eal;
use super::error::{check, DpdkError};
use super::mempool::Mempool;

/// How to set up a port.
#[derive(Clone, Debug)]
pub struct PortConfig {
    /// RX queues (each gets its own mempool).
    pub rx_queues: u16,
    /// TX queues.
    pub tx_queues: u16,
    /// RX descriptors per queue (clamped to what the PMD allows).
    pub rx_desc: u16,
    /// TX descriptors per queue (clamped to what the PMD allows).
    pub tx_desc: u16,
    /// Mbufs in each RX queue's pool (beyond the ring, this is what the application may hold).
    pub mbufs_per_rx_queue: u32,
    /// Per-lcore mbuf cache of each pool.
    pub mbuf_cache: u32,
    /// Data room of each RX mbuf, headroom included.
    pub data_room: u16,
    /// MTU to set before start, if any.
    pub mtu: Option<u16>,
    /// Receive every frame, whatever its destination MAC.
    pub promiscuous: bool,
    /// Receive every multicast frame: a port with an IPv6 address needs the Neighbor
    /// Solicitations to its solicited-node group (33:33:ff:xx:xx:xx, RFC 4861 §7.2.2), which a
    /// port filtering multicast by address drops. PMDs without the setting (net_af_packet,
    /// net_memif: no multicast filter of their own; af_packet gets what its kernel interface
    /// accepts) are left as they are.
    pub allmulticast: bool,
    /// The port's 802.1Q identity: its queues tag what they send and accept only its VLAN
    /// (`net::vlan`); `None`: untagged.
    pub vlan: Option<crate::net::Vlan>,
    /// Configure the RX queues' interrupts (`intr_conf.rxq`) so that a thread may sleep until
    /// a frame arrives ([`RxQueue::interrupt`]); a PMD that refuses the configuration gets the
    /// port without them. Of the PMDs here only net_tap has them (net_memif's
    /// `rx_queue_intr_enable` refuses in DPDK 22.11, net_af_packet has none).
    pub rx_interrupts: bool,
}

impl Default for PortConfig {
    fn default() -> Self {
        PortConfig {
            rx_queues: 1,
            tx_queues: 1,
            rx_desc: 1024,
            tx_desc: 1024,
            mbufs_per_rx_queue: 4095,
            mbuf_cache: 256,
            data_room: Mempool::DEFAULT_DATA_ROOM,
            mtu: None,
            promiscuous: false,
            allmulticast: false,
            vlan: None,
            rx_interrupts: true,
        }
    }
}

/// Link state as the PMD reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkStatus {
    /// Link up.
    pub up: bool,
    /// Speed in Mb/s (0 when unknown).
    pub speed_mbps: u32,
    /// Full duplex.
    pub full_duplex: bool,
}

/// The basic counters of a port (`rte_eth_stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortStats {
    /// Packets received.
    pub ipackets: u64,
    /// Packets sent.
    pub opackets: u64,
    /// Bytes received.
    pub ibytes: u64,
    /// Bytes sent.
    pub obytes: u64,
    /// Packets dropped by the device because no RX descriptor was free.
    pub imissed: u64,
    /// Erroneous received packets.
    pub ierrors: u64,
    /// Failed transmissions.
    pub oerrors: u64,
    /// RX mbuf allocation failures.
    pub rx_nombuf: u64,
}

/// The per-queue counters of a port (`rte_eth_stats.q_ipackets` / `q_opackets`; DPDK keeps
/// them for the first `RTE_ETHDEV_QUEUE_STAT_CNTRS` = 16 queues, where the PMD fills them in:
/// net_af_packet, net_tap and net_memif do).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Packets received on the RX queue.
    pub ipackets: u64,
    /// Packets sent on the TX queue.
    pub opackets: u64,
}

/// State shared by the port and its queue handles; stops and closes the port on drop.
#[derive(Debug)]
pub(crate) struct PortInner {
    pub(crate) id: u16,
    name: String,
    taken: Mutex<(Vec<bool>, Vec<bool>)>,
    vlan: Option<crate::net::Vlan>,
    /// The epoll instance the RX queues' interrupts are added to (`RxQueue::interrupt`), when
    /// the port was configured with them. Closed after the port.
    pub(crate) rx_epoll: Option<OwnedFd>,
    // Dropped (freed) after the port is closed, in `Drop` order below.
    rx_pools: Vec<Mempool>,
}

impl PortInner {
    /// Gives queue `q` (`dir` 0: RX, 1: TX) back: its handle was dropped, so another may take
    /// it (an IA opened again on a port kept open for the process).
    pub(crate) fn release(&self, dir: usize, q: u16) {
        let mut taken = self.taken.lock().unwrap_or_else(|e| e.into_inner());
        let list = if dir == 0 { &mut taken.0 } else { &mut taken.1 };
        if let Some(t) = list.get_mut(usize::from(q)) {
            *t = false;
        }
    }
}

impl Drop for PortInner {
    fn drop(&mut self) {
        // SAFETY: the port was started by `Port::open`; no queue handle is left (they hold this
        // Arc), so no thread polls the port any more.
        let stop = unsafe { dpdk_sys::rte_eth_dev_stop(self.id) };
        if stop < 0 {
            tracing::warn!(target: "dpdk_roce::dpdk::port", port = self.id, ret = stop, "rte_eth_dev_stop failed");
        }
        // SAFETY: as above; after close the port id is not used again by this object.
        let close = unsafe { dpdk_sys::rte_eth_dev_close(self.id) };
        if close < 0 {
            tracing::warn!(target: "dpdk_roce::dpdk::port", port = self.id, ret = close, "rte_eth_dev_close failed");
        }
        // rx_pools are dropped after this: the closed port no longer holds their mbufs.
    }
}

/// A started ethdev port. Cloning is cheap (shared); the port closes when the last clone and the
/// last queue handle are gone.
#[derive(Clone, Debug)]
pub struct Port {
    inner: Arc<PortInner>,
}

static POOL_SEQ: AtomicU32 = AtomicU32::new(0);

/// PMDs known to have no RX interrupts in DPDK 22.11, not asked for them (asking only logs
/// errors: net_af_packet installs no descriptor, net_memif's `rx_queue_intr_enable` refuses).
const NO_RX_INTERRUPTS: [&str; 2] = ["net_af_packet", "net_memif"];

/// The driver name of port `id`.
fn driver_name(id: u16) -> Result<String, DpdkError> {
    // SAFETY: all-zero is a valid rte_eth_dev_info to be filled in.
    let mut info: dpdk_sys::rte_eth_dev_info = unsafe { std::mem::zeroed() };
    // SAFETY: valid port id and out-pointer.
    let ret = unsafe { dpdk_sys::rte_eth_dev_info_get(id, &mut info) };
    check(|| format!("rte_eth_dev_info_get(port {id})"), ret)?;
    if info.driver_name.is_null() {
        return Ok(String::new());
    }
    // SAFETY: driver_name points to the driver's static NUL-terminated name.
    Ok(unsafe { CStr::from_ptr(info.driver_name) }
        .to_string_lossy()
        .into_owned())
}

impl Port {
    /// The port id of the ethdev named `name` (e.g. `"net_af_packet0"`, `"net_tap0"`).
    pub fn find(_eal: &Eal, name: &str) -> Result<u16, DpdkError> {
        let c = CString::new(name).map_err(|_| DpdkError::PortNotFound(name.to_owned()))?;
        let mut id = 0u16;
        // SAFETY: c is a valid NUL-terminated string; id is a valid out-pointer.
        let ret = unsafe { dpdk_sys::rte_eth_dev_get_port_by_name(c.as_ptr(), &mut id) };
        if ret < 0 {
            return Err(DpdkError::PortNotFound(name.to_owned()));
        }
        Ok(id)
    }

    /// Finds the port `name`, configures its queues (a fresh mempool per RX queue), applies the
    /// MTU and promiscuous mode of `cfg`, and starts it.
    pub fn open(eal: &Eal, name: &str, cfg: &PortConfig) -> Result<Port, DpdkError> {
        let id = Self::find(eal, name)?;
        let op = |what: &str| format!("{what}(port {id} {name})");

        // SAFETY: all-zero rte_eth_conf is DPDK's documented "defaults" configuration.
        let mut conf: dpdk_sys::rte_eth_conf = unsafe { std::mem::zeroed() };
        let intr = cfg.rx_interrupts
            && !driver_name(id).is_ok_and(|d| NO_RX_INTERRUPTS.contains(&d.as_str()));
        conf.intr_conf.set_rxq(u32::from(intr));
        // SAFETY: id is a valid port; conf lives across the call and is copied by DPDK.
        let mut ret =
            unsafe { dpdk_sys::rte_eth_dev_configure(id, cfg.rx_queues, cfg.tx_queues, &conf) };
        if ret < 0 && intr {
            tracing::debug!(target: "dpdk_roce::dpdk::port", port = id, ret, "no RX interrupts: configured without");
            conf.intr_conf.set_rxq(0);
            // SAFETY: as above.
            ret =
                unsafe { dpdk_sys::rte_eth_dev_configure(id, cfg.rx_queues, cfg.tx_queues, &conf) };
        }
        check(|| op("rte_eth_dev_configure"), ret)?;
        let rx_epoll = if conf.intr_conf.rxq() == 1 {
            // SAFETY: plain syscall; the descriptor returned is owned by nobody else.
            let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
            // SAFETY: fd is a fresh descriptor of this process, owned from here on.
            (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
        } else {
            None
        };

        let (mut nb_rx, mut nb_tx) = (cfg.rx_desc, cfg.tx_desc);
        // SAFETY: valid port id and out-pointers.
        let ret = unsafe { dpdk_sys::rte_eth_dev_adjust_nb_rx_tx_desc(id, &mut nb_rx, &mut nb_tx) };
        check(|| op("rte_eth_dev_adjust_nb_rx_tx_desc"), ret)?;

        if let Some(mtu) = cfg.mtu {
            // SAFETY: valid, configured port id.
            let ret = unsafe { dpdk_sys::rte_eth_dev_set_mtu(id, mtu) };
            check(|| op(&format!("rte_eth_dev_set_mtu({mtu})")), ret)?;
        }

        // SAFETY: valid port id.
        let socket = unsafe { dpdk_sys::rte_eth_dev_socket_id(id) };
        let socket = u32::try_from(socket).unwrap_or(dpdk_sys::SOCKET_ID_ANY as u32);
        let mut rx_pools = Vec::with_capacity(cfg.rx_queues.into());
        for q in 0..cfg.rx_queues {
            let seq = POOL_SEQ.fetch_add(1, Ordering::Relaxed);
            let pool = Mempool::new(
                eal,
                &format!("rx{id}.{q}.{seq}"),
                cfg.mbufs_per_rx_queue,
                cfg.mbuf_cache,
                cfg.data_room,
            )?;
            // SAFETY: valid configured port; a null rxconf means the PMD's defaults; the pool
            // outlives the queue (it is dropped only after the port is closed).
            let ret = unsafe {
                dpdk_sys::rte_eth_rx_queue_setup(
                    id,
                    q,
                    nb_rx,
                    socket,
                    std::ptr::null(),
                    pool.as_ptr(),
                )
            };
            check(|| op(&format!("rte_eth_rx_queue_setup(q {q})")), ret)?;
            rx_pools.push(pool);
        }
        for q in 0..cfg.tx_queues {
            // SAFETY: valid configured port; a null txconf means the PMD's defaults.
            let ret =
                unsafe { dpdk_sys::rte_eth_tx_queue_setup(id, q, nb_tx, socket, std::ptr::null()) };
            check(|| op(&format!("rte_eth_tx_queue_setup(q {q})")), ret)?;
        }
        // SAFETY: all queues are set up.
        let ret = unsafe { dpdk_sys::rte_eth_dev_start(id) };
        check(|| op("rte_eth_dev_start"), ret)?;

        let port = Port {
            inner: Arc::new(PortInner {
                id,
                name: name.to_owned(),
                vlan: cfg.vlan,
                rx_epoll,
                taken: Mutex::new((
                    vec![false; cfg.rx_queues.into()],
                    vec![false; cfg.tx_queues.into()],
                )),
                rx_pools,
            }),
        };
        if cfg.promiscuous {
            port.set_promiscuous(true)?;
        }
        if cfg.allmulticast {
            match port.set_allmulticast(true) {
                Err(DpdkError::Rte { errno, .. }) if errno == libc::ENOTSUP => {}
                r => r?,
            }
        }
        Ok(port)
    }

    /// Port id.
    pub fn id(&self) -> u16 {
        self.inner.id
    }

    /// The device name the port was opened by.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The port's 802.1Q identity (`PortConfig::vlan`).
    pub fn vlan(&self) -> Option<crate::net::Vlan> {
        self.inner.vlan
    }

    /// Number of RX and TX queues the port was configured with.
    pub fn queue_counts(&self) -> (u16, u16) {
        let taken = self.inner.taken.lock().unwrap_or_else(|e| e.into_inner());
        (taken.0.len() as u16, taken.1.len() as u16)
    }

    /// Queue pairs: RX/TX queues with the same index (the smaller of the two counts).
    pub fn queue_pairs(&self) -> u16 {
        let (rx, tx) = self.queue_counts();
        rx.min(tx)
    }

    /// The pool of RX queue `q`.
    pub fn rx_pool(&self, q: u16) -> Option<&Mempool> {
        self.inner.rx_pools.get(usize::from(q))
    }

    /// The PMD's driver name, e.g. `"net_af_packet"`.
    pub fn driver_name(&self) -> Result<String, DpdkError> {
        driver_name(self.id())
    }

    /// The PMD's transmit offload capabilities (`rte_eth_dev_info.tx_offload_capa`, bits
    /// `RTE_ETH_TX_OFFLOAD_*`).
    pub fn tx_offload_capa(&self) -> Result<u64, DpdkError> {
        // SAFETY: all-zero is a valid rte_eth_dev_info to be filled in.
        let mut info: dpdk_sys::rte_eth_dev_info = unsafe { std::mem::zeroed() };
        // SAFETY: valid port id and out-pointer.
        let ret = unsafe { dpdk_sys::rte_eth_dev_info_get(self.id(), &mut info) };
        check(|| format!("rte_eth_dev_info_get(port {})", self.id()), ret)?;
        Ok(info.tx_offload_capa)
    }

    /// Takes the receive handle of queue `q` (once while that handle lives).
    pub fn take_rx_queue(&self, q: u16) -> Result<RxQueue, DpdkError> {
        self.take(0, q)?;
        Ok(RxQueue {
            port: Arc::clone(&self.inner),
            queue: q,
            _not_sync: Default::default(),
        })
    }

    /// Takes the transmit handle of queue `q` (once while that handle lives).
    pub fn take_tx_queue(&self, q: u16) -> Result<TxQueue, DpdkError> {
        self.take(1, q)?;
        Ok(TxQueue {
            port: Arc::clone(&self.inner),
            queue: q,
            _not_sync: Default::default(),
        })
    }

    /// Both handles of queue pair `q`.
    pub fn take_queue_pair(&self, q: u16) -> Result<(RxQueue, TxQueue), DpdkError> {
        Ok((self.take_rx_queue(q)?, self.take_tx_queue(q)?))
    }

    fn take(&self, dir: usize, q: u16) -> Result<(), DpdkError> {
        let mut taken = self.inner.taken.lock().unwrap_or_else(|e| e.into_inner());
        let list = if dir == 0 { &mut taken.0 } else { &mut taken.1 };
        match list.get_mut(usize::from(q)) {
            Some(t) if !*t => {
                *t = true;
                Ok(())
            }
            _ => Err(DpdkError::QueueUnavailable {
                kind: if dir == 0 { "rx" } else { "tx" },
                port: self.id(),
                queue: q,
            }),
        }
    }

    /// The port's MAC address.
    pub fn mac(&self) -> Result<[u8; 6], DpdkError> {
        let mut a = dpdk_sys::rte_ether_addr::default();
        // SAFETY: valid port id and out-pointer.
        let ret = unsafe { dpdk_sys::rte_eth_macaddr_get(self.id(), &mut a) };
        check(|| format!("rte_eth_macaddr_get(port {})", self.id()), ret)?;
        Ok(a.addr_bytes)
    }

    /// The current MTU.
    pub fn mtu(&self) -> Result<u16, DpdkError> {
        let mut mtu = 0u16;
        // SAFETY: valid port id and out-pointer.
        let ret = unsafe { dpdk_sys::rte_eth_dev_get_mtu(self.id(), &mut mtu) };
        check(|| format!("rte_eth_dev_get_mtu(port {})", self.id()), ret)?;
        Ok(mtu)
    }

    /// Sets the MTU (the PMD may refuse while started or beyond its frame size).
    pub fn set_mtu(&self, mtu: u16) -> Result<(), DpdkError> {
        // SAFETY: valid port id.
        let ret = unsafe { dpdk_sys::rte_eth_dev_set_mtu(self.id(), mtu) };
        check(
            || format!("rte_eth_dev_set_mtu(port {}, {mtu})", self.id()),
            ret,
        )
        .map(drop)
    }

    /// Link state; `wait` lets the PMD take up to ~9 s to bring the link up.
    pub fn link(&self, wait: bool) -> Result<LinkStatus, DpdkError> {
        let mut l = dpdk_sys::rte_eth_link::default();
        // SAFETY: valid port id and out-pointer.
        let ret = unsafe {
            if wait {
                dpdk_sys::rte_eth_link_get(self.id(), &mut l)
            } else {
                dpdk_sys::rte_eth_link_get_nowait(self.id(), &mut l)
            }
        };
        check(|| format!("rte_eth_link_get(port {})", self.id()), ret)?;
        Ok(LinkStatus {
            up: u32::from(l.link_status()) == dpdk_sys::RTE_ETH_LINK_UP,
            speed_mbps: l.link_speed,
            full_duplex: u32::from(l.link_duplex()) == dpdk_sys::RTE_ETH_LINK_FULL_DUPLEX,
        })
    }

    /// Enables or disables promiscuous mode.
    pub fn set_promiscuous(&self, on: bool) -> Result<(), DpdkError> {
        // SAFETY: valid port id.
        let ret = unsafe {
            if on {
                dpdk_sys::rte_eth_promiscuous_enable(self.id())
            } else {
                dpdk_sys::rte_eth_promiscuous_disable(self.id())
            }
        };
        check(|| format!("promiscuous {on} (port {})", self.id()), ret).map(drop)
    }

    /// Whether promiscuous mode is on.
    pub fn promiscuous(&self) -> bool {
        // SAFETY: valid port id.
        unsafe { dpdk_sys::rte_eth_promiscuous_get(self.id()) == 1 }
    }

    /// Enables or disables all-multicast mode.
    pub fn set_allmulticast(&self, on: bool) -> Result<(), DpdkError> {
        // SAFETY: valid port id.
        let ret = unsafe {
            if on {
                dpdk_sys::rte_eth_allmulticast_enable(self.id())
            } else {
                dpdk_sys::rte_eth_allmulticast_disable(self.id())
            }
        };
        check(|| format!("allmulticast {on} (port {})", self.id()), ret).map(drop)
    }

    /// Whether all-multicast mode is on.
    pub fn allmulticast(&self) -> bool {
        // SAFETY: valid port id.
        unsafe { dpdk_sys::rte_eth_allmulticast_get(self.id()) == 1 }
    }

    /// The port's counters.
    pub fn stats(&self) -> Result<PortStats, DpdkError> {
        let mut s = dpdk_sys::rte_eth_stats::default();
        // SAFETY: valid port id and out-pointer.
        let ret = unsafe { dpdk_sys::rte_eth_stats_get(self.id(), &mut s) };
        check(|| format!("rte_eth_stats_get(port {})", self.id()), ret)?;
        Ok(PortStats {
            ipackets: s.ipackets,
            opackets: s.opackets,
            ibytes: s.ibytes,
            obytes: s.obytes,
            imissed: s.imissed,
            ierrors: s.ierrors,
            oerrors: s.oerrors,
            rx_nombuf: s.rx_nombuf,
        })
    }

    /// The counters of queue `q` (RX queue `q` and TX queue `q`); `None` beyond the 16 queues
    /// DPDK keeps counters for.
    pub fn queue_stats(&self, q: u16) -> Result<Option<QueueStats>, DpdkError> {
        let mut s = dpdk_sys::rte_eth_stats::default();
        // SAFETY: valid port id and out-pointer.
        let ret = unsafe { dpdk_sys::rte_eth_stats_get(self.id(), &mut s) };
        check(|| format!("rte_eth_stats_get(port {})", self.id()), ret)?;
        let q = usize::from(q);
        Ok(s.q_ipackets
            .get(q)
            .zip(s.q_opackets.get(q))
            .map(|(&ipackets, &opackets)| QueueStats { ipackets, opackets }))
    }

    /// Zeroes the port's counters.
    pub fn reset_stats(&self) -> Result<(), DpdkError> {
        // SAFETY: valid port id.
        let ret = unsafe { dpdk_sys::rte_eth_stats_reset(self.id()) };
        check(|| format!("rte_eth_stats_reset(port {})", self.id()), ret).map(drop)
    }
}
