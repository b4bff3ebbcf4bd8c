//! The device behind IAs: one port with its engine (shards, CM, neighbour layer), its registered
//! memory, its EP and reserved-service-point tables. Every IA opened on a profile's device in a
//! process shares it, as OFA providers share one verbs device among the opens of an IA name:
//! each [`super::Ia`] adds only its own async EVD, consumer context and object accounting.
//!
//! The registry holds devices weakly: the last IA to close drops its device (engine threads
//! joined, memory tables freed) and the next open builds a fresh one on the same DPDK port, which
//! stays started for the process (`crate::dpdk::ProfilePort`).

use super::conn_qual::ConnQual;
use super::ep::EpInner;
use super::error::DatError;
use super::memory::SharedMemory;
use super::port_io::PortIo;
use crate::config::Profile;
use crate::engine::runtime::Engine;
use crate::mem::MrTable;
use crate::transport::types::Mtu;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

/// One port with its engine, shared by the IAs opened on it.
pub(crate) struct Device {
    // Declared first: dropped (threads joined) before the port below.
    pub engine: Engine<SharedMemory, PortIo>,
    pub mem: Arc<MrTable>,
    /// The port's addresses, one per family.
    pub ips: crate::cm::LocalIps,
    pub pmtu: Mtu,
    /// Live EPs of every IA of the device by QPN, to attach events to their EP and move its
    /// state (QPNs are unique per device).
    pub eps: Mutex<HashMap<u32, Weak<EpInner>>>,
    /// Starting PSNs and CM source ports (seeded from the OS).
    random: Mutex<ChaCha8Rng>,
    next_shard: AtomicUsize,
    /// Reserved service points: CM port -> the RSP's qualifier and reserved EP
    /// (dat_rsp_create).
    pub rsps: Mutex<HashMap<u16, (ConnQual, Weak<EpInner>)>>,
    /// Public service points by CM port (dat_cr_handoff, provider-created EPs).
    pub psps: Mutex<HashMap<u16, super::listener::Listener>>,
    /// Where dat_psp_create_any starts looking for a free qualifier.
    pub next_any_qual: AtomicU32,
    /// The DPDK port of a profile's device (none for an IA on caller-started queues); its
    /// counters are read by the telemetry commands (`super::telemetry`).
    pub(crate) port: Option<crate::dpdk::ProfilePort>,
}

impl Device {
    pub(crate) fn new(
        engine: Engine<SharedMemory, PortIo>,
        mem: Arc<MrTable>,
        ips: crate::cm::LocalIps,
        pmtu: Mtu,
        seed: u64,
        port: Option<crate::dpdk::ProfilePort>,
    ) -> Device {
        Device {
            engine,
            mem,
            ips,
            pmtu,
            eps: Mutex::new(HashMap::new()),
            random: Mutex::new(ChaCha8Rng::seed_from_u64(seed)),
            next_shard: AtomicUsize::new(0),
            rsps: Mutex::new(HashMap::new()),
            psps: Mutex::new(HashMap::new()),
            next_any_qual: AtomicU32::new(seed as u32),
            port,
        }
    }

    /// A starting PSN for a new connection: 24 random bits (a PSN an off-path peer could
    /// predict lets it inject into the connection; [`crate::random`]).
    pub fn next_psn(&self) -> u32 {
        self.random
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .next_u32()
            & 0x00ff_ffff
    }

    /// The source port of a connection request's IP CM header: an ephemeral port drawn at
    /// random, as rdma_cm binds one for a connecting ID.
    pub fn next_src_port(&self) -> u16 {
        crate::cm::ip_cm::ephemeral_port(
            self.random
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .next_u32(),
        )
    }

    /// The shard of a new EP (round robin).
    pub fn next_shard(&self) -> usize {
        self.next_shard.fetch_add(1, Ordering::Relaxed) % self.engine.shards()
    }

    pub fn lock_rsps(&self) -> MutexGuard<'_, HashMap<u16, (ConnQual, Weak<EpInner>)>> {
        self.rsps.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn lock_psps(&self) -> MutexGuard<'_, HashMap<u16, super::listener::Listener>> {
        self.psps.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn lock_eps(&self) -> MutexGuard<'_, HashMap<u32, Weak<EpInner>>> {
        self.eps.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The devices of profiles open in this process, by DPDK device name.
fn devices() -> &'static Mutex<HashMap<String, Weak<Device>>> {
    static DEVICES: OnceLock<Mutex<HashMap<String, Weak<Device>>>> = OnceLock::new();
    DEVICES.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The devices of profiles open in this process, by DPDK device name in name order (what
/// the telemetry commands report on).
pub(crate) fn open_devices() -> Vec<(String, Arc<Device>)> {
    let devices = devices().lock().unwrap_or_else(|p| p.into_inner());
    let mut open: Vec<(String, Arc<Device>)> = devices
        .iter()
        .filter_map(|(name, d)| Some((name.clone(), d.upgrade()?)))
        .collect();
    drop(devices);
    open.sort_by(|a, b| a.0.cmp(&b.0));
    open
}

/// The device of `profile`: the one an IA of this process already has open on the same DPDK
/// device (it must have the same IP addresses), else a new one from `open`.
pub(crate) fn shared(
    profile: &Profile,
    open: impl FnOnce() -> Result<Device, DatError>,
) -> Result<Arc<Device>, DatError> {
    let key = profile.port.device_name();
    let mut devices = devices().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(dev) = devices.get(&key).and_then(Weak::upgrade) {
        if dev.ips != profile.roce.address.ips() {
            return Err(DatError::InvalidParameter(
                "the device is open with other IP addresses",
            ));
        }
        return Ok(dev);
    }
    let dev = Arc::new(open()?);
    devices.insert(key, Arc::downgrade(&dev));
    Ok(dev)
}

#[cfg(test)]
mod tests {
    use crate::dat::{Ep, Ia, IaConfig, Lmr, Pz};
    use crate::mem::access::Access;

    fn ia(host: u8) -> Ia {
        ia_with(host, crate::config::Progress::Inline)
    }

    /// An in-memory IA (no peer) at 10.35.0.`host`, its engine in `progress` mode.
    pub(super) fn ia_with(host: u8, progress: crate::config::Progress) -> Ia {
        let (io, _other) = crate::engine::channel_io::ChannelIo::pair(16);
        Ia::open_with(
            IaConfig {
                mac: crate::wire::ethernet::EthernetAddress([2, 0, 0, 0, 9, host]),
                address: crate::config::PortAddresses::v4(
                    std::net::Ipv4Addr::new(10, 35, 0, host),
                    24,
                )
                .expect("a host address on its prefix"),
                routes: Default::default(),
                dscp: 0,
                cm: Default::default(),
                congestion: Default::default(),
                mtu: 1500,
                shards: 1,
                engine: crate::engine::runtime::EngineConfig {
                    progress,
                    poll_cores: vec![0],
                    idle_pause_us: 20,
                    ..Default::default()
                },
            },
            vec![Box::new(io)],
        )
        .expect("in-memory IA")
    }

    /// What a peer must not guess differs between two devices and does not start where a
    /// counter would: the first QP number, the first R_Key and the starting PSNs (issue:
    /// every process gave its first QP 0x11 and its first region R_Key 0x80000001).
    #[test]
    fn two_devices_draw_different_qpns_r_keys_and_psns() {
        let ids = |ia: &Ia| {
            let pz = Pz::create(ia).unwrap();
            let ep = Ep::create(ia, &pz, None, None, None, None, None).unwrap();
            let lmr = Lmr::create(&pz, 64, Access::REMOTE_WRITE).unwrap();
            let psns: Vec<u32> = (0..4).map(|_| ia.inner.next_psn()).collect();
            (ep.qpn(), lmr.rmr_context(), psns)
        };
        let (a, b) = (ia(1), ia(2));
        let (qa, ka, pa) = ids(&a);
        let (qb, kb, pb) = ids(&b);
        assert_ne!(qa, qb, "first QPNs");
        assert_ne!(ka, kb, "first R_Keys");
        assert_ne!(pa, pb, "starting PSNs");
        assert!(qa != 0x11 && qb != 0x11, "{qa:#x} {qb:#x}");
        assert!(ka != 0x8000_0001 && kb != 0x8000_0001, "{ka:#x} {kb:#x}");
        assert!(pa.iter().chain(&pb).all(|&p| p <= 0x00ff_ffff));
    }
}

#[cfg(test)]
mod failure_tests {
    use crate::dat::{DatError, DatEvent, Evd, EvdFlags};
    use crate::engine::runtime::AsyncEvent;
    use std::time::Duration;

    /// A panic on the IA's poll thread: its async EVD gets the catastrophic event, a thread
    /// waiting on another EVD is released with an error, and the IA still closes.
    #[test]
    fn a_poll_thread_panic_is_catastrophic_for_the_ia_not_a_hang() {
        let ia = super::tests::ia_with(9, crate::config::Progress::Core);
        let dto = Evd::create(&ia, 8, EvdFlags::DTO).unwrap();
        let waiter = std::thread::spawn(move || dto.wait(Some(Duration::from_secs(30)), 1));
        std::thread::sleep(Duration::from_millis(20));
        let r = ia.inner.engine.with_host(0, |_| -> u8 { panic!("a bug") });
        assert!(r.is_err());
        let ev = ia
            .async_evd()
            .wait(Some(Duration::from_secs(10)), 1)
            .unwrap();
        assert!(
            matches!(ev, DatEvent::Async(AsyncEvent::ShardFailed { shard: 0 })),
            "{ev:?}"
        );
        let got = waiter.join().unwrap();
        assert!(matches!(got, Err(DatError::Internal(_))), "{got:?}");
        drop(ia);
    }
}
