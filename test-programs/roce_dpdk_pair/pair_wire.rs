//! Two DPDK ports of one process as the wire of a [`Pair`](roce_sim::pair::Pair): side A
//! sends on port A, side B on port B, and what each port receives goes to its side. With the
//! ports on the two ends of a veth pair, the verified workloads of `sim::workload` run over
//! real DPDK I/O ("two ports in one process").

use dpdk_roce::dpdk::DpdkFrameIo;
use dpdk_roce::io::FrameIo;
use roce_sim::link::Side;
use roce_sim::pair::RealWireIo;

/// Port A and port B.
pub struct DpdkPairWire {
    pub a: DpdkFrameIo,
    pub b: DpdkFrameIo,
}

impl RealWireIo for DpdkPairWire {
    fn send(&mut self, from: Side, frame: &[u8]) {
        let io = match from {
            Side::A => &mut self.a,
            Side::B => &mut self.b,
        };
        // A dropped frame is counted in the queue's stats; RC recovers it.
        let _ = io.tx(frame);
        io.flush();
    }

    fn receive(&mut self, f: &mut dyn FnMut(Side, &[u8])) {
        self.a.rx_burst(&mut |frame| f(Side::A, frame));
        self.b.rx_burst(&mut |frame| f(Side::B, frame));
    }
}
