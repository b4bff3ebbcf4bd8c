//! Connection management glue: listening, connecting, accepting and disconnecting through the
//! CM on QP1, and what a connection change does to its QP and EP.

use super::*;

impl<M: Memory> Host<M> {
    /// Listens for connection requests on an rdma_cm TCP-space port.
    pub fn listen(&mut self, port: u16) -> Result<(), HostError> {
        Ok(self.cm.listen(port)?)
    }

    /// Stops listening on an rdma_cm TCP-space port.
    pub fn unlisten(&mut self, port: u16) -> Result<(), HostError> {
        Ok(self.cm.unlisten(port)?)
    }

    /// The CM ran: its events and deadline may have changed.
    pub(super) fn cm_ran(&mut self) {
        self.cm_ran = true;
        self.cm_deadline = self.cm.poll_timeout();
    }

    /// Starts connecting `params.local_qpn` to a remote listener.
    pub fn connect(&mut self, now: Instant, params: ConnectParams) -> Result<CmId, HostError> {
        let Some(e) = self.qps.get_mut(&params.local_qpn) else {
            return Err(HostError::UnknownQp);
        };
        let (qpn, ip) = (params.local_qpn, params.dst_ip);
        self.work.touch(qpn, e);
        let r = self.cm.connect(now, params);
        self.cm_ran();
        let id = r?;
        if let Some(e) = self.qps.get_mut(&qpn) {
            e.peer = Some(ip);
        }
        self.bind_conn(qpn, id);
        Ok(id)
    }

    /// Accepts a connection request on `params.local_qpn`.
    pub fn accept(
        &mut self,
        now: Instant,
        id: CmId,
        params: AcceptParams,
    ) -> Result<(), HostError> {
        let qpn = params.local_qpn;
        let Some(e) = self.qps.get_mut(&qpn) else {
            return Err(HostError::UnknownQp);
        };
        self.work.touch(qpn, e);
        let src = self.request_src.get(&id).copied();
        let r = self.cm.accept(
            now,
            id,
            params,
            &mut QpTable {
                qps: &mut self.qps,
                work: &mut self.work,
            },
        );
        self.cm_ran();
        r?;
        self.request_src.remove(&id);
        if let (Some(ip), Some(e)) = (src, self.qps.get_mut(&qpn)) {
            e.peer = Some(ip);
        }
        self.bind_conn(qpn, id);
        Ok(())
    }

    /// Rejects a connection request.
    pub fn reject(&mut self, now: Instant, id: CmId, private: &[u8]) -> Result<(), HostError> {
        let r = self.cm.reject(now, id, private);
        self.cm_ran();
        r?;
        self.request_src.remove(&id);
        Ok(())
    }

    /// Disconnects the connection of `qpn`: DREQ, QP to ERROR (outstanding work flushes).
    /// Whether the connection of `qpn` is up (not connecting, not going down).
    pub fn connection_up(&self, qpn: u32) -> bool {
        self.conn_of_qp
            .get(&qpn)
            .is_some_and(|&id| self.cm.is_up(id))
    }

    pub fn disconnect(&mut self, now: Instant, qpn: u32) -> Result<(), HostError> {
        let id = *self.conn_of_qp.get(&qpn).ok_or(HostError::UnknownQp)?;
        let r = self.cm.disconnect(
            now,
            id,
            &mut QpTable {
                qps: &mut self.qps,
                work: &mut self.work,
            },
        );
        self.cm_ran();
        r?;
        Ok(())
    }

    /// The next CM event. Other events stay queued for
    /// [`poll_host_event`](Self::poll_host_event) (none is dropped).
    pub fn poll_event(&mut self) -> Option<CmEvent> {
        self.collect();
        let i = self
            .events
            .iter()
            .position(|e| matches!(e, HostEvent::Cm(_)))?;
        match self.events.remove(i) {
            Some(HostEvent::Cm(ev)) => Some(ev),
            _ => None,
        }
    }

    /// Connection `id` was established (arms the hard watermark, seed 002) or went down.
    pub(super) fn connection_changed(&mut self, id: CmId, up: bool) {
        let Some(&qpn) = self.qp_of_conn.get(&id) else {
            return;
        };
        if self.conn_of_qp.get(&qpn) != Some(&id) {
            // The QP has moved on to another connection since.
            self.qp_of_conn.remove(&id);
            return;
        }
        self.set_ep_connected(qpn, up);
    }

    /// Records that QP `qpn` now belongs to connection `id` (both directions).
    fn bind_conn(&mut self, qpn: u32, id: CmId) {
        if let Some(old) = self.conn_of_qp.insert(qpn, id) {
            self.qp_of_conn.remove(&old);
        }
        self.qp_of_conn.insert(id, qpn);
    }
}
