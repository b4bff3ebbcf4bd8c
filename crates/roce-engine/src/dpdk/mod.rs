//! Safe owners over the system DPDK (the `dpdk-sys` crate): the EAL, ethdev ports and their
//! queues, pktmbuf pools and mbufs, and the TSC clock of the poll-mode cores.
//!
//! This module and `dpdk-sys` are the only places with `unsafe` for DPDK; every owner here frees
//! what it owns on `Drop` (ports are stopped and closed, pools freed once no mbuf is out), except
//! the EAL itself, which DPDK cannot re-initialise after `rte_eal_cleanup` and so lives until the
//! process exits, and with it its telemetry socket ([`telemetry`]: commands a running process
//! answers; the runtime directory that holds the socket goes at exit, see [`ProfilePort`]).
//!
//! Typical use (one process per endpoint, see `src/bin/dpdk-port-check.rs`):
//!
//! ```no_run
//! use dpdk_roce::dpdk::{Eal, EalArgs, Port, PortConfig};
//! let args = EalArgs::new("0").vdev("net_af_packet0,iface=veth0").no_huge(256).to_args();
//! let eal = Eal::init(&args)?;
//! let port = Port::open(eal, "net_af_packet0", &PortConfig::default())?;
//! let (_rx, _tx) = port.take_queue_pair(0)?;
//! # Ok::<(), dpdk_roce::dpdk::DpdkError>(())
//! ```

mod burst;
mod eal;
mod error;
mod frame_io;
mod hugepage_alloc;
mod mbuf;
mod mempool;
mod pinned_tx;
mod port;
mod rx_interrupt;
pub mod telemetry;
mod tsc;

pub use burst::{RxQueue, TxQueue};
pub use eal::{hugepages_available, Eal, EalArgs};
pub use error::DpdkError;
pub use frame_io::{hugepage_files, runtime_base, DpdkFrameIo, ProfilePort};
pub use hugepage_alloc::HugepageAllocator;
pub use mbuf::{ExtBufTracker, Mbuf};
pub use mempool::Mempool;
pub use pinned_tx::TX_OFFLOAD_MULTI_SEGS;
pub use port::{LinkStatus, Port, PortConfig, PortStats, QueueStats};
pub use rx_interrupt::QueueInterrupt;
pub use tsc::Tsc;
