//! The interface adapter (dat_ia_open / dat_ia_close): one port with its engine, its registered
//! memory and its async EVD. Every other object holds the IA alive; a graceful close is refused
//! (DAT_INVALID_STATE) while any of them is open.

use super::ep::EpInner;
use super::error::{DatError, Refused};
use super::evd::{Evd, EvdFlags};
use super::memory::SharedMemory;
use super::port_io::PortIo;
use crate::config::Profile;
use crate::engine::host::{Host, HostConfig};
use crate::engine::runtime::{Engine, EngineConfig, EventSink};
use crate::mem::MrTable;
use crate::net::NetConfig;
use crate::transport::types::Mtu;
use crate::wire::ethernet::EthernetAddress;
use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// Events the async EVD holds.
const ASYNC_EVD_SIZE: usize = 1024;

/// How to open an IA on already-started port queues.
#[derive(Clone, Debug)]
pub struct IaConfig {
    pub mac: EthernetAddress,
    pub ip: Ipv4Addr,
    pub prefix_len: u8,
    /// IP MTU of the port.
    pub mtu: u16,
    /// Shards (one `Host` each).
    pub shards: usize,
    pub engine: EngineConfig,
}

/// The shared state of an IA.
pub(crate) struct IaInner {
    // Declared first: dropped (threads joined) before the port below.
    pub engine: Engine<SharedMemory, PortIo>,
    pub mem: Arc<MrTable>,
    pub ip: Ipv4Addr,
    pub pmtu: Mtu,
    /// Live EPs by QPN, to attach events to their EP and move its state.
    pub eps: Mutex<HashMap<u32, Weak<EpInner>>>,
    next_psn: AtomicU32,
    next_shard: AtomicUsize,
    pub context: super::context::ConsumerContext,
    /// Reserved service points: connection qualifier -> the reserved EP (dat_rsp_create).
    pub rsps: Mutex<HashMap<u16, Weak<EpInner>>>,
    /// Bound RMRs of this IA by `rmr_context` (dat_ep_post_rdma_read_to_rmr resolves its
    /// local RMR triplet here).
    pub windows: Mutex<HashMap<u32, super::rmr::WindowSink>>,
    /// Public service points: connection qualifier -> the PSP's EVD (dat_cr_handoff).
    pub psps: Mutex<HashMap<u16, Weak<super::evd::EvdInner>>>,
    /// Where dat_psp_create_any starts looking for a free qualifier.
    pub next_any_qual: AtomicU32,
    _port: Option<crate::dpdk::ProfilePort>,
}

impl IaInner {
    /// A starting PSN for a new connection (24 bits, varied per connection).
    pub fn next_psn(&self) -> u32 {
        self.next_psn
            .fetch_add(0x01_0203, Ordering::Relaxed)
            .wrapping_mul(2_654_435_761)
            & 0x00ff_ffff
    }

    /// The shard of a new EP (round robin).
    pub fn next_shard(&self) -> usize {
        self.next_shard.fetch_add(1, Ordering::Relaxed) % self.engine.shards()
    }

    pub fn lock_windows(&self) -> std::sync::MutexGuard<'_, HashMap<u32, super::rmr::WindowSink>> {
        self.windows.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn lock_psps(&self) -> std::sync::MutexGuard<'_, HashMap<u16, Weak<super::evd::EvdInner>>> {
        self.psps.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn lock_rsps(&self) -> std::sync::MutexGuard<'_, HashMap<u16, Weak<EpInner>>> {
        self.rsps.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn lock_eps(&self) -> std::sync::MutexGuard<'_, HashMap<u32, Weak<EpInner>>> {
        self.eps.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// An open interface adapter.
pub struct Ia {
    pub(crate) inner: Arc<IaInner>,
    async_evd: Evd,
}

impl Ia {
    /// Opens an IA on port queues the caller started (`ports`: one queue pair, or one per
    /// shard), e.g. an in-memory cable or a DPDK port.
    pub fn open_with(config: IaConfig, ports: Vec<PortIo>) -> Result<Ia, DatError> {
        Self::open_inner(config, ports, None)
    }

    /// Opens an IA on the port of a profile (EAL initialised once per process): address, MTU,
    /// progress mode, poll cores and idle pause come from the profile.
    pub fn open(profile: &Profile) -> Result<Ia, DatError> {
        let pp = crate::dpdk::ProfilePort::open(profile)
            .map_err(|e| DatError::Internal(format!("port: {e}")))?;
        if !pp.wait_link_up(std::time::Duration::from_secs(10)) {
            return Err(DatError::Internal("link down".into()));
        }
        let mac = pp
            .port
            .mac()
            .map_err(|e| DatError::Internal(e.to_string()))?;
        let shards = profile.engine.poll_cores.len().max(1);
        // One queue pair per shard when the profile's port has enough, else one shared.
        let ports: Vec<PortIo> = pp
            .frame_ios(shards, profile.port.mbuf_pool_size)
            .map_err(|e| DatError::Internal(e.to_string()))?
            .into_iter()
            .map(|io| Box::new(io) as PortIo)
            .collect();
        let engine = EngineConfig::from_profile(profile);
        let config = IaConfig {
            mac: EthernetAddress(mac),
            ip: profile.roce.address.addr(),
            prefix_len: profile.roce.address.prefix_len(),
            mtu: profile.port.mtu,
            shards,
            engine,
        };
        Self::open_inner(config, ports, Some(pp))
    }

    fn open_inner(
        config: IaConfig,
        ports: Vec<PortIo>,
        port: Option<crate::dpdk::ProfilePort>,
    ) -> Result<Ia, DatError> {
        let mem = Arc::new(MrTable::default());
        let pmtu = crate::config::roce_pmtu_for(config.mtu)
            .ok_or(DatError::InvalidParameter("MTU too small for RoCE"))?;
        let guid = {
            let m = config.mac.0;
            u64::from_be_bytes([m[0] ^ 2, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]])
        };
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            ^ u64::from(std::process::id());
        let mut hosts = Vec::new();
        for i in 0..config.shards.max(1) {
            let mut net = NetConfig::new(config.mac, config.ip, config.prefix_len);
            net.mtu = config.mtu;
            let host = Host::new(
                HostConfig {
                    net,
                    ca_guid: guid,
                    seed: seed.wrapping_add(i as u64 * 0x9e37_79b9),
                },
                SharedMemory(mem.clone()),
            )
            .map_err(|_| DatError::InvalidParameter("network configuration"))?;
            hosts.push(host);
        }
        let async_sink = EventSink::new(ASYNC_EVD_SIZE);
        let engine = Engine::new(config.engine, hosts, ports, async_sink.clone())?;
        let inner = Arc::new(IaInner {
            engine,
            mem,
            ip: config.ip,
            pmtu,
            eps: Mutex::new(HashMap::new()),
            next_psn: AtomicU32::new(seed as u32),
            next_shard: AtomicUsize::new(0),
            context: Default::default(),
            rsps: Mutex::new(HashMap::new()),
            psps: Mutex::new(HashMap::new()),
            windows: Mutex::new(HashMap::new()),
            next_any_qual: AtomicU32::new(seed as u32),
            _port: port,
        });
        let async_evd = Evd::from_sink(&inner, async_sink, EvdFlags::ASYNC);
        Ok(Ia { inner, async_evd })
    }

    /// The IA address (the port's IPv4 address).
    pub fn address(&self) -> Ipv4Addr {
        self.inner.ip
    }

    /// The consumer context (dat_set_consumer_context / dat_get_consumer_context).
    pub fn context(&self) -> &super::context::ConsumerContext {
        &self.inner.context
    }

    /// The async EVD (DAT_ASYNC_ERROR events, EVD overflows).
    pub fn async_evd(&self) -> &Evd {
        &self.async_evd
    }

    /// Shards of the engine.
    pub fn shards(&self) -> usize {
        self.inner.engine.shards()
    }

    /// Inline progress: polls the shards once (core mode: nothing to do).
    pub fn progress(&self) -> bool {
        self.inner.engine.progress()
    }

    /// Graceful close (DAT_CLOSE_GRACEFUL_FLAG): refused with DAT_INVALID_STATE while any
    /// object of this IA (PZ, LMR, EVD, EP, SRQ, PSP, pending CR) is open.
    pub fn close(self) -> Result<(), Refused<Ia>> {
        // This handle and its async EVD hold one reference each.
        let others = Arc::strong_count(&self.inner).saturating_sub(2);
        if others > 0 {
            return Err(Refused {
                object: self,
                error: DatError::InvalidState(format!("{others} objects of this IA are open")),
            });
        }
        Ok(())
    }
}
