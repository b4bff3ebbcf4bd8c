//! A message's bytes on its scatter/gather list: [`scatter`] writes received data (a SEND's
//! payload, a READ response, an atomic's original value) at a byte offset of a local SGL, and
//! [`sgl_payload`] names a byte range of a send WR's SGL as the payload of a request packet.

use super::transmit::Payload;
use super::types::Sge;
use crate::mem::access::{Access, KeyKind, MemError, MemRef, Memory};

/// Writes `data` at byte offset `off` of the SGL (local write access).
pub(super) fn scatter(
    mem: &mut dyn Memory,
    pd: u32,
    sgl: &[Sge],
    mut off: u64,
    data: &[u8],
) -> Result<(), MemError> {
    let mut pos = 0usize;
    for s in sgl {
        if pos == data.len() {
            break;
        }
        let slen = u64::from(s.len);
        if off >= slen {
            off -= slen;
            continue;
        }
        let n = ((slen - off) as usize).min(data.len() - pos);
        let r = MemRef {
            kind: KeyKind::Local,
            pd,
            key: s.lkey,
            addr: s.addr.checked_add(off).ok_or(MemError::OutOfBounds)?,
            len: n as u32,
        };
        mem.write(&r, Access::LOCAL_WRITE, &data[pos..pos + n])?;
        pos += n;
        off = 0;
    }
    if pos < data.len() {
        return Err(MemError::OutOfBounds);
    }
    Ok(())
}

/// The payload of bytes `off..off+len` of a message, as segments of its SGL.
pub(super) fn sgl_payload(sgl: &[Sge], pd: u32, mut off: u64, len: u64) -> Payload {
    let mut p = Payload::new();
    let mut left = len;
    for s in sgl {
        if left == 0 {
            break;
        }
        let slen = u64::from(s.len);
        if off >= slen {
            off -= slen;
            continue;
        }
        let n = (slen - off).min(left);
        p.push(MemRef {
            kind: KeyKind::Local,
            pd,
            key: s.lkey,
            addr: s.addr.saturating_add(off),
            len: n as u32,
        });
        left -= n;
        off = 0;
    }
    p
}
