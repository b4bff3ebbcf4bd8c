//! The port queue of an IA, whatever drives it (a DPDK queue pair, an in-memory cable), behind
//! one type so the DAT objects are not generic over the I/O.

use crate::io::{Built, FrameBuf, FrameIo, PinnedFrame, RxInterrupt};

/// A boxed queue pair.
pub type PortIo = Box<dyn FrameIo + Send>;

impl FrameIo for Box<dyn FrameIo + Send> {
    fn rx_burst(&mut self, f: &mut dyn FnMut(&[u8])) -> usize {
        (**self).rx_burst(f)
    }
    fn tx(&mut self, frame: &[u8]) -> bool {
        (**self).tx(frame)
    }
    fn tx_build(
        &mut self,
        scratch: &mut Vec<u8>,
        build: &mut dyn FnMut(&mut dyn FrameBuf) -> bool,
    ) -> Built {
        (**self).tx_build(scratch, build)
    }
    fn flush(&mut self) {
        (**self).flush()
    }
    fn ready(&mut self) -> bool {
        (**self).ready()
    }
    fn tx_pending(&self) -> bool {
        (**self).tx_pending()
    }
    fn zero_copy_min(&self) -> Option<usize> {
        (**self).zero_copy_min()
    }
    fn rx_other_vlan(&self) -> u64 {
        (**self).rx_other_vlan()
    }
    fn tx_pinned(&mut self, frame: PinnedFrame<'_>) -> bool {
        (**self).tx_pinned(frame)
    }
    fn rx_interrupt(&self) -> Option<Box<dyn RxInterrupt>> {
        (**self).rx_interrupt()
    }
}
