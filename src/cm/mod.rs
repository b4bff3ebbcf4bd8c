//! Connection management: the IB communication manager (IBTA vol. 1 ch. 12) over RoCEv2 UD
//! MADs on QP1, with rdma_cm's IP service IDs (annex A11) so a Linux rdma_cm peer can connect.

pub mod ip_cm;
