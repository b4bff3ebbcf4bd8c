//! The interface adapter (dat_ia_open / dat_ia_close): a port with its engine and registered
//! memory (a `Device`, shared by the IAs opened on the same port), and the IA's own async EVD
//! and consumer context. Every other object holds its IA alive; a graceful close is refused
//! (DAT_INVALID_STATE) while any of them is open.

use super::device::Device;
use super::error::{DatError, HandleKind, Refused, StateKind};
use super::evd::Evd;
use super::evd_flags::EvdFlags;
use super::memory::SharedMemory;
use super::port_io::PortIo;
use crate::config::faults::FaultConfig;
use crate::config::Profile;
use crate::engine::faults::FaultyIo;
use crate::engine::runtime::{Engine, EngineConfig, EventSink};
use crate::host::{Host, HostConfig};
use crate::mem::MrTable;
use crate::wire::ethernet::EthernetAddress;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};

/// Events the async EVD holds.
/// Events the device's own, unread async sink holds (a bounded ring: the rest are dropped).
const DEVICE_SINK_SIZE: usize = 16;

/// How to open an IA on already-started port queues.
#[derive(Clone, Debug)]
pub struct IaConfig {
    /// The port's Ethernet address: the source of every frame, and the base of the CA GUID the
    /// CM sends (EUI-64 from the MAC).
    pub mac: EthernetAddress,
    /// The port's addresses, one per family: what peers connect to. The IA address
    /// ([`Ia::address`]) is the first (IPv4 if the port has one).
    pub address: crate::config::PortAddresses,
    /// Static routes to peers outside the IPv4 subnet (`net::NetConfig::routes`).
    pub routes: crate::net::RouteTable,
    /// DSCP of the port's RoCEv2 packets (`net::NetConfig::dscp`).
    pub dscp: u8,
    /// The connection manager's timers (the profile's `roce.cm_*`).
    pub cm: crate::cm::CmConfig,
    /// Congestion control and the packets' ECN codepoint (the profile's `[congestion]`).
    pub congestion: crate::config::congestion::Congestion,
    /// IP MTU of the port.
    pub mtu: u16,
    /// Shards (one `Host` each).
    pub shards: usize,
    /// Progress mode, poll cores and idle pause of the engine (as
    /// [`EngineConfig::from_profile`] reads them from a profile).
    pub engine: EngineConfig,
}

/// The state of one open IA: the device it shares with the other IAs opened on the same port
/// (engine, memory, EP tables; reached through `Deref`, so `ia.engine` is the device's), and
/// what is its own: the consumer context and the async EVD's sink. Every object of the IA holds
/// an `Arc` of it, which is the IA's object accounting for a graceful close.
pub(crate) struct IaInner {
    pub dev: Arc<Device>,
    pub context: super::context::ConsumerContext,
    /// The async EVD of this IA: the asynchronous events of its EPs and SRQs, and the overflows
    /// of its EVDs, are routed here.
    pub async_sink: Arc<EventSink>,
    /// Bound RMRs of this IA by `rmr_context` (dat_ep_post_rdma_read_to_rmr resolves its
    /// local RMR triplet here).
    pub windows: Mutex<HashMap<u32, super::window_sink::WindowSink>>,
    /// The CM counters at the IA's open or last reset ([`Ia::counters`]).
    pub counters_base: Mutex<super::counters::IaCounters>,
    /// Its objects made and ended ([`Ia::counters`]).
    pub objects: super::counters::ObjectCounts,
}

impl std::ops::Deref for IaInner {
    type Target = Device;

    fn deref(&self) -> &Device {
        &self.dev
    }
}

impl IaInner {
    pub fn lock_windows(&self) -> MutexGuard<'_, HashMap<u32, super::window_sink::WindowSink>> {
        self.windows.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn lock_counters_base(&self) -> MutexGuard<'_, super::counters::IaCounters> {
        self.counters_base.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// How long `Ia::open` waits for the port's link before it opens with the link down.
const LINK_UP_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// An open interface adapter.
pub struct Ia {
    pub(crate) inner: Arc<IaInner>,
    async_evd: Evd,
    /// The IA whose async EVD this one shares ([`Ia::open_with_async_evd`]), held like any of
    /// its objects: it cannot close gracefully while this IA is open.
    _async_owner: Option<Arc<IaInner>>,
}

impl Ia {
    /// Opens an IA on port queues the caller started (`ports`: one queue pair, or one per
    /// shard), e.g. an in-memory cable or a DPDK port. The IA has a device of its own; more IAs
    /// can share it with [`Ia::open_on_same_device`].
    pub fn open_with(config: IaConfig, ports: Vec<PortIo>) -> Result<Ia, DatError> {
        let dev = Self::device(config, ports, None)?;
        Ok(Self::on_device(Arc::new(dev)))
    }

    /// Opens an IA on the port of a profile (EAL initialised once per process): address, MTU,
    /// progress mode, poll cores and idle pause come from the profile.
    ///
    /// Every IA of a process opened on the same DPDK device shares one device (port, engine,
    /// registered memory, CM): several IAs may be open at once, as with the OFA providers, and
    /// an IA can be opened again after all were closed (the port stays started for the process).
    /// Events that concern no EP, SRQ or EVD (the neighbour layer's: an unanswered ARP, an
    /// address conflict) go to the async EVD of every IA open on the device.
    pub fn open(profile: &Profile) -> Result<Ia, DatError> {
        let dev = super::device::shared(profile, || Self::profile_device(profile))?;
        Ok(Self::on_device(dev))
    }

    /// Another IA on this IA's device (what a second [`Ia::open`] of the same profile gives).
    pub fn open_on_same_device(&self) -> Ia {
        Self::on_device(self.inner.dev.clone())
    }

    /// dat_ia_open with the consumer's async EVD (`async_evd_handle` not NULL on input): an IA
    /// on `profile`'s device whose asynchronous events go to `async_evd`, the async EVD of an
    /// IA of this process on the same device. As in the OFA provider (IBTA allows one async
    /// event handler per channel adapter, vol. 1 §11.5.2), any other EVD is
    /// DAT_INVALID_HANDLE / DAT_INVALID_HANDLE_EVD_ASYNC: one that is not an IA's async EVD, or
    /// one of another device. `async_evd`'s IA cannot close gracefully while this one is open
    /// (its EVD is in use).
    pub fn open_with_async_evd(profile: &Profile, async_evd: &Evd) -> Result<Ia, DatError> {
        let owner = Self::async_owner(async_evd)?;
        // The EVD's device is open (its IA holds it): a profile of another port would open a
        // device of its own, so look it up without opening one.
        let dev = super::device::shared(profile, || Err(Self::not_shareable()))?;
        if !Arc::ptr_eq(&dev, &owner.dev) {
            return Err(Self::not_shareable());
        }
        Ok(Self::on_device_with(dev, Some(async_evd)))
    }

    /// Another IA on the device of `async_evd`'s IA, sharing that async EVD (what
    /// [`Ia::open_with_async_evd`] gives with a profile of that device).
    pub fn open_sharing_async_evd(async_evd: &Evd) -> Result<Ia, DatError> {
        let dev = Self::async_owner(async_evd)?.dev.clone();
        Ok(Self::on_device_with(dev, Some(async_evd)))
    }

    /// The IA whose async EVD `evd` is.
    fn async_owner(evd: &Evd) -> Result<&Arc<IaInner>, DatError> {
        if evd.flags().contains(EvdFlags::ASYNC) {
            Ok(&evd.inner.ia)
        } else {
            Err(Self::not_shareable())
        }
    }

    fn not_shareable() -> DatError {
        DatError::InvalidHandleOf {
            kind: HandleKind::EvdAsync,
            what: "not the async EVD of an IA on this device",
        }
    }

    /// Whether this IA's async EVD is another IA's ([`Ia::open_with_async_evd`]).
    pub fn shares_async_evd(&self) -> bool {
        !Arc::ptr_eq(&self.async_evd.inner.ia, &self.inner)
    }

    fn on_device(dev: Arc<Device>) -> Ia {
        Self::on_device_with(dev, None)
    }

    /// An IA on `dev`; its async EVD is `shared` or a new one.
    fn on_device_with(dev: Arc<Device>, shared: Option<&Evd>) -> Ia {
        let async_sink = match shared {
            Some(evd) => evd.inner.sink.clone(),
            None => {
                let sink = EventSink::new(super::limits::DEFAULT_ASYNC_EVD_QLEN);
                // The device's own events (ARP, address conflicts) reach every async EVD once.
                dev.engine.async_listeners().add(&sink);
                sink
            }
        };
        // The CM is the port's: this IA counts from what it has counted so far.
        let base = dev
            .engine
            .with_host(0, |h| h.cm().stats())
            .map(super::counters::IaCounters::from)
            .unwrap_or_default();
        let inner = Arc::new(IaInner {
            dev,
            context: Default::default(),
            async_sink: async_sink.clone(),
            windows: Mutex::new(HashMap::new()),
            counters_base: Mutex::new(base),
            objects: Default::default(),
        });
        let (async_evd, _async_owner) = match shared {
            Some(evd) => (
                Evd {
                    inner: evd.inner.clone(),
                },
                Some(evd.inner.ia.clone()),
            ),
            None => (Evd::from_sink(&inner, async_sink, EvdFlags::ASYNC), None),
        };
        Ia {
            inner,
            async_evd,
            _async_owner,
        }
    }

    fn profile_device(profile: &Profile) -> Result<Device, DatError> {
        let pp = crate::dpdk::ProfilePort::open(profile)
            .map_err(|e| DatError::Internal(format!("port: {e}")))?;
        if profile.eal.telemetry {
            super::telemetry::register_commands();
        }
        // An IA opens with its link down, like a NIC whose cable is not in yet (a net_memif
        // server's link comes up only when a client attaches). The short wait spares a link
        // that is about to come up (a memif client's) a first ARP or REQ into the void; a
        // connection made while the link is down waits for it within the CM's and ARP's
        // retries, and fails as unreachable when it stays down.
        if !pp.wait_link_up(LINK_UP_WAIT) {
            tracing::info!(profile = %profile.name, "IA opened with the link down");
        }
        let mac = pp
            .port
            .mac()
            .map_err(|e| DatError::Internal(e.to_string()))?;
        let shards = profile.engine.poll_cores.len().max(1);
        // One queue pair per shard when the profile's port has enough, else one shared.
        // Fault injection (`engine::faults`), when the environment or the profile asks.
        let faults = FaultConfig::from_env_or(profile.faults).map_err(DatError::Internal)?;
        if let Some(f) = &faults {
            tracing::warn!(profile = %profile.name, "fault injection on: {f:?}");
        }
        let ports: Vec<PortIo> = pp
            .frame_ios(shards, profile.port.mbuf_pool_size)
            .map_err(|e| DatError::Internal(e.to_string()))?
            .into_iter()
            .enumerate()
            .map(|(i, io)| match faults {
                Some(f) => Box::new(FaultyIo::new(io, f, i as u64)) as PortIo,
                None => Box::new(io) as PortIo,
            })
            .collect();
        let engine = EngineConfig::from_profile(profile);
        let config = IaConfig {
            mac: EthernetAddress(mac),
            address: profile.roce.address,
            routes: profile.roce.route_table(),
            dscp: profile.roce.dscp,
            cm: profile.roce.cm,
            congestion: profile.congestion,
            mtu: profile.port.mtu,
            shards,
            engine,
        };
        Self::device(config, ports, Some(pp))
    }

    fn device(
        config: IaConfig,
        ports: Vec<PortIo>,
        port: Option<crate::dpdk::ProfilePort>,
    ) -> Result<Device, DatError> {
        let mem = Arc::new(MrTable::default());
        let pmtu = crate::config::roce_pmtu_for(config.mtu)
            .ok_or(DatError::InvalidParameter("MTU too small for RoCE"))?;
        let guid = {
            let m = config.mac.0;
            u64::from_be_bytes([m[0] ^ 2, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]])
        };
        let random = || {
            crate::random::os_u64()
                .map_err(|e| DatError::InsufficientResources(format!("OS random source: {e}")))
        };
        let mut hosts = Vec::new();
        for _ in 0..config.shards.max(1) {
            let mut net = config.address.net_config(config.mac);
            net.routes = config.routes;
            net.dscp = config.dscp;
            net.ecn = config.congestion.ecn;
            net.mtu = config.mtu;
            let mut host = Host::new(
                HostConfig {
                    net,
                    ca_guid: guid,
                    seed: random()?,
                    qpns: crate::host::QpnPolicy::Random,
                    cm: config.cm,
                },
                SharedMemory(mem.clone()),
            )
            .map_err(|_| DatError::InvalidParameter("network configuration"))?;
            host.set_congestion(config.congestion.cc);
            hosts.push(host);
        }
        // The engine's own async sink is the device's and nobody reads it: every IA gets the
        // device's events as a listener (`on_device`), the rest are routed to their IA.
        let engine = Engine::new(
            config.engine,
            hosts,
            ports,
            EventSink::new(DEVICE_SINK_SIZE),
        )?;
        Ok(Device::new(
            engine,
            mem,
            config.address.ips(),
            pmtu,
            random()?,
            port,
        ))
    }

    /// The IA address: the port's first address (IPv4 if it has one).
    pub fn address(&self) -> IpAddr {
        self.inner.ips.primary()
    }

    /// The port's addresses, one per family.
    pub fn addresses(&self) -> crate::cm::LocalIps {
        self.inner.ips
    }

    /// The consumer context (dat_set_consumer_context / dat_get_consumer_context).
    pub fn context(&self) -> &super::context::ConsumerContext {
        &self.inner.context
    }

    /// The async EVD (DAT_ASYNC_ERROR events, EVD overflows).
    pub fn async_evd(&self) -> &Evd {
        &self.async_evd
    }

    /// dat_ia_open's `async_evd_min_qlen`: the async EVD holds at least `min_qlen` events
    /// ([`ia_attr::async_evd_qlen`](super::ia_attr::async_evd_qlen): never fewer than its
    /// default, DAT_INVALID_PARAMETER of argument 2 outside 1..=max_evd_qlen). It only grows.
    pub fn reserve_async_events(&self, min_qlen: i64) -> Result<(), DatError> {
        let qlen = super::limits::async_evd_qlen(min_qlen)?;
        if qlen > self.async_evd.size() {
            self.async_evd.resize(qlen)?;
        }
        Ok(())
    }

    /// Shards of the engine.
    pub fn shards(&self) -> usize {
        self.inner.engine.shards()
    }

    /// The engine's away helper's sleep counters of `shard` (`Engine::away_stats`), read
    /// without driving the shard.
    pub fn away_stats(&self, shard: usize) -> Option<crate::engine::runtime::WorkerStats> {
        self.inner.engine.away_stats(shard)
    }

    /// Inline progress: polls the shards once (core mode: nothing to do).
    pub fn progress(&self) -> bool {
        self.inner.engine.progress()
    }

    /// Graceful close (DAT_CLOSE_GRACEFUL_FLAG): refused as [`Ia::can_close`].
    pub fn close(self) -> Result<(), Refused<Ia>> {
        match self.can_close() {
            Ok(()) => Ok(()),
            Err(error) => Err(Refused {
                object: self,
                error,
            }),
        }
    }

    /// Whether a graceful close would close the IA: DAT_INVALID_STATE_IA_IN_USE while any
    /// object of this IA (PZ, LMR, RMR, EVD, CNO, EP, SRQ, PSP, RSP, pending CR) is open.
    pub fn can_close(&self) -> Result<(), DatError> {
        // This handle and its own async EVD hold one reference each (a shared async EVD holds
        // its own IA's).
        let own = if self.shares_async_evd() { 1 } else { 2 };
        let others = Arc::strong_count(&self.inner).saturating_sub(own);
        if others > 0 {
            return Err(DatError::InvalidStateOf {
                kind: StateKind::IaInUse,
                what: format!("{others} objects of this IA are open"),
            });
        }
        Ok(())
    }
}
