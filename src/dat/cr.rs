//! Connection requests (dat_cr_query / dat_cr_accept / dat_cr_reject): dequeued from a PSP's
//! EVD; answered once, by accepting on an UNCONNECTED EP or rejecting, both with private data.
//! A request dropped unanswered is rejected, so the peer is not left waiting.

use super::context::ConsumerContext;
use super::ep::{Ep, EpState};
use super::error::DatError;
use super::ia::IaInner;
use crate::cm::{AcceptParams, CmId};
use crate::engine::runtime::ConnRequest;
use crate::transport::memory::Access;
use crate::wire::psn::Psn;
use std::net::Ipv4Addr;
use std::sync::Arc;

/// A pending connection request.
pub struct Cr {
    ia: Arc<IaInner>,
    id: CmId,
    conn_qual: u16,
    remote_ip: Ipv4Addr,
    remote_qpn: u32,
    private_data: Vec<u8>,
    answered: bool,
    context: ConsumerContext,
}

impl core::fmt::Debug for Cr {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Cr")
            .field("conn_qual", &self.conn_qual)
            .field("remote_ip", &self.remote_ip)
            .field("remote_qpn", &self.remote_qpn)
            .finish()
    }
}

impl Cr {
    pub(crate) fn new(ia: &Arc<IaInner>, req: ConnRequest) -> Cr {
        Cr {
            ia: ia.clone(),
            id: req.id,
            conn_qual: req.port,
            remote_ip: req.src_ip,
            remote_qpn: req.remote_qpn,
            private_data: req.private_data,
            answered: false,
            context: ConsumerContext::default(),
        }
    }

    /// The listened connection qualifier.
    pub fn conn_qual(&self) -> u16 {
        self.conn_qual
    }

    /// The requester's IA address.
    pub fn remote_address(&self) -> Ipv4Addr {
        self.remote_ip
    }

    /// The requester's private data.
    pub fn private_data(&self) -> &[u8] {
        &self.private_data
    }

    /// Writable, as dtest expects of the buffer `dat_cr_query` returns.
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.private_data
    }

    /// The consumer context (dat_set_consumer_context / dat_get_consumer_context).
    pub fn context(&self) -> &ConsumerContext {
        &self.context
    }

    /// dat_cr_accept: connects the request to `ep` (UNCONNECTED, same IA); Established follows
    /// on the EP's connection EVD.
    pub fn accept(mut self, ep: &Ep, private_data: &[u8]) -> Result<(), DatError> {
        if !Arc::ptr_eq(ep.inner.ia(), &self.ia) {
            return Err(DatError::InvalidHandle("EP of another IA"));
        }
        let (qpn, srq) = ep.inner.accept_qpn()?;
        let attr = ep.attr();
        let mut p = AcceptParams::new(qpn, Psn::new(self.ia.next_psn()));
        p.pmtu = Some(self.ia.pmtu);
        p.responder_resources = attr.max_rdma_read_in;
        p.initiator_depth = attr.max_rdma_read_out;
        p.srq = srq;
        p.access = Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC;
        p.private_data = private_data.to_vec();
        self.ia.engine.accept(self.id, p)?;
        self.answered = true;
        ep.inner.set_state(EpState::CompletionPending);
        Ok(())
    }

    /// dat_cr_reject: the requester gets PEER_REJECTED with `private_data`.
    pub fn reject(mut self, private_data: &[u8]) -> Result<(), DatError> {
        self.answered = true;
        self.ia.engine.reject(self.id, private_data.to_vec())?;
        Ok(())
    }
}

impl Drop for Cr {
    fn drop(&mut self) {
        if !self.answered {
            let _ = self.ia.engine.reject(self.id, Vec::new());
        }
    }
}
