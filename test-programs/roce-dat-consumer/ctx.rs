//! The consumer's IA, PZ and EVDs, its registered memory, the EP attributes of the cases.

use super::*;

pub(crate) const PRIV_ALL: u32 = d::DAT_MEM_PRIV_ALL_FLAG;
pub(crate) const MSG: usize = 4096;
pub(crate) const PAGE: usize = 4096;
/// Bytes of the target region the server advertises.
pub(crate) const TARGET_LEN: usize = 16 * PAGE;
/// What the server's guard pages and untouchable regions hold.
pub(crate) const GUARD: u8 = 0xa5;
pub(crate) const UNTOUCHED: u8 = 0x5a;
/// The target's last bytes: no case writes them legitimately.
pub(crate) const TAIL: usize = PAGE;

/// IA, PZ and EVDs of one process.
pub(crate) struct Ctx {
    pub(crate) ia: Handle,
    pub(crate) async_evd: Handle,
    pub(crate) pz: Handle,
    pub(crate) dto: Handle,
    pub(crate) conn: Handle,
    pub(crate) cr: Handle,
}

pub(crate) fn must(what: &str, rc: u32) -> Result<(), String> {
    if rc == d::DAT_SUCCESS {
        Ok(())
    } else {
        Err(format!("{what}: {}", code_name(rc)))
    }
}

impl Ctx {
    pub(crate) fn open(name: &str) -> Result<Ctx, String> {
        let (mut ia, mut async_evd) = (Handle::NULL, Handle::NULL);
        must(
            "dat_ia_open",
            c::ia_open(name, 8, Some(&mut async_evd), Some(&mut ia)),
        )?;
        let mut pz = Handle::NULL;
        must("dat_pz_create", c::pz_create(ia, Some(&mut pz)))?;
        let evd = |flags: u32| -> Result<Handle, String> {
            let mut h = Handle::NULL;
            must(
                "dat_evd_create",
                c::evd_create(ia, 1024, flags, Some(&mut h)),
            )?;
            Ok(h)
        };
        let dto = evd(d::DAT_EVD_DTO_FLAG)?;
        let conn = evd(d::DAT_EVD_CONNECTION_FLAG)?;
        let cr = evd(d::DAT_EVD_CR_FLAG)?;
        Ok(Ctx {
            ia,
            async_evd,
            pz,
            dto,
            conn,
            cr,
        })
    }

    pub(crate) fn ep(&self, attr: Option<c::EpAttr>) -> Result<Handle, String> {
        let mut ep = Handle::NULL;
        must(
            "dat_ep_create",
            c::ep_create(
                self.ia,
                self.pz,
                self.dto,
                self.dto,
                self.conn,
                attr,
                Some(&mut ep),
            ),
        )?;
        Ok(ep)
    }

    /// An LMR of this context's PZ over all of `region`.
    pub(crate) fn lmr(&self, region: &'static Region) -> Result<c::Lmr, String> {
        c::lmr_create(self.ia, self.pz, region, 0, region.len(), PRIV_ALL)
            .map_err(|e| format!("dat_lmr_create: {}", code_name(e)))
    }

    /// The next connection event within `t`.
    pub(crate) fn conn_event(&self, t: Duration) -> Option<(u32, Vec<u8>)> {
        match c::evd_wait(self.conn, t.as_micros() as u32, true) {
            Ok(Event::Connection {
                number,
                private_data,
                ..
            }) => Some((number, private_data)),
            Ok(Event::Other(n)) => Some((n, Vec::new())),
            _ => None,
        }
    }

    /// The next DTO completion within `t`: (cookie, status, length).
    pub(crate) fn dto_event(&self, t: Duration) -> Option<(u64, u32, u32)> {
        match c::evd_wait(self.dto, t.as_micros() as u32, true) {
            Ok(Event::Dto {
                cookie,
                status,
                len,
                ..
            }) => Some((cookie, status, len)),
            _ => None,
        }
    }
}

pub(crate) fn attr(recv: i32, request: i32, iov: i32) -> c::EpAttr {
    c::EpAttr {
        max_recv_dtos: recv,
        max_request_dtos: request,
        max_recv_iov: iov,
        max_request_iov: iov,
    }
}

pub(crate) const T: Duration = Duration::from_secs(30);
