//! The `server` role: guarded memory advertised in the accept private data, connection after connection, memory checked after each.

use super::*;

/// What the server advertises in its accept private data (8 little-endian u64s).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Info {
    pub(crate) target: Remote,
    pub(crate) other_pz: Remote,
    pub(crate) freed: Remote,
}

impl Info {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut v = Vec::new();
        for r in [self.target, self.other_pz, self.freed] {
            v.extend_from_slice(&r.addr.to_le_bytes());
            v.extend_from_slice(&r.len.to_le_bytes());
            v.extend_from_slice(&r.rmr_context.to_le_bytes());
        }
        v
    }

    pub(crate) fn decode(b: &[u8]) -> Option<Info> {
        let r = |i: usize| -> Option<Remote> {
            let s = b.get(i * 16..i * 16 + 16)?;
            Some(Remote {
                addr: u64::from_le_bytes(s[0..8].try_into().ok()?),
                len: u32::from_le_bytes(s[8..12].try_into().ok()?),
                rmr_context: u32::from_le_bytes(s[12..16].try_into().ok()?),
            })
        };
        Some(Info {
            target: r(0)?,
            other_pz: r(1)?,
            freed: r(2)?,
        })
    }
}

/// Receives the server keeps posted per connection.
pub(crate) const SERVER_RECVS: u64 = 64;

pub(crate) fn server(
    name: &str,
    qual: u64,
    connections: u32,
    r: &mut Report,
) -> Result<(), String> {
    let x = Ctx::open(name)?;
    // [guard page][target][guard page], only the target registered.
    let whole = Region::new(TARGET_LEN + 2 * PAGE, GUARD);
    whole.write(PAGE, &[UNTOUCHED; TARGET_LEN]);
    let target = c::lmr_create(x.ia, x.pz, whole, PAGE, TARGET_LEN, PRIV_ALL).map_err(code_name)?;
    // A region of another PZ, and a region registered then freed.
    let mut pz2 = Handle::NULL;
    must("dat_pz_create", c::pz_create(x.ia, Some(&mut pz2)))?;
    let other = Region::new(PAGE, UNTOUCHED);
    let other_lmr = c::lmr_create(x.ia, pz2, other, 0, PAGE, PRIV_ALL).map_err(code_name)?;
    let gone = Region::new(PAGE, UNTOUCHED);
    let gone_lmr = x.lmr(gone)?;
    must("dat_lmr_free", c::lmr_free(gone_lmr.handle))?;
    let info = Info {
        target: target.remote(0, TARGET_LEN as u32),
        other_pz: other_lmr.remote(0, PAGE as u32),
        freed: gone_lmr.remote(0, PAGE as u32),
    };
    let recv_lmr = x.lmr(Region::new(MSG * SERVER_RECVS as usize, 0))?;
    let recv_seg = |i: u64| recv_lmr.seg(i * MSG as u64, MSG as u32);
    let mut psp = Handle::NULL;
    must(
        "dat_psp_create",
        c::psp_create(x.ia, qual, x.cr, Some(&mut psp)),
    )?;
    println!("READY");
    let _ = std::io::stdout().flush();
    let mut n = 0u32;
    loop {
        let cr = match c::evd_wait(x.cr, INFINITE, true) {
            Ok(Event::ConnectionRequest { cr }) => cr,
            Ok(e) => return Err(format!("CR EVD: {e:?}")),
            Err(e) => return Err(format!("dat_evd_wait(CR): {}", code_name(e))),
        };
        n += 1;
        let ep = x.ep(Some(attr(SERVER_RECVS as i32, 16, 4)))?;
        for i in 0..SERVER_RECVS {
            must(
                "dat_ep_post_recv",
                c::ep_post_recv(ep, Some(&[recv_seg(i)]), 1, i, 0),
            )?;
        }
        must("dat_cr_accept", c::cr_accept(cr, ep, &info.encode()))?;
        // Serve until the connection ends: repost every receive.
        let mut outstanding = SERVER_RECVS;
        let mut ended = false;
        let mut received = 0u64;
        let mut errors = std::collections::BTreeMap::<String, u32>::new();
        while !ended || outstanding > 0 {
            if let Ok(Event::Dto { cookie, status, .. }) = c::evd_wait(x.dto, 20_000, true) {
                outstanding -= 1;
                if status != d::DAT_DTO_SUCCESS {
                    *errors.entry(status_name(status)).or_default() += 1;
                }
                if status == d::DAT_DTO_SUCCESS && !ended {
                    received += 1;
                    if c::ep_post_recv(ep, Some(&[recv_seg(cookie)]), 1, cookie, 0)
                        == d::DAT_SUCCESS
                    {
                        outstanding += 1;
                    }
                }
            }
            while let Ok(e) = c::evd_dequeue(x.conn) {
                if let Event::Connection { number, .. } = e {
                    if number == d::DAT_CONNECTION_EVENT_DISCONNECTED
                        || number == d::DAT_CONNECTION_EVENT_BROKEN
                    {
                        ended = true;
                    }
                }
            }
        }
        println!("INFO connection {n} ended after {received} receives, errors {errors:?}");
        // Nothing outside registered memory changed, nor the target's tail (no case writes
        // it legitimately), nor the other PZ's or the freed region.
        let changed = |b: Vec<u8>, v: u8| b.iter().filter(|&&x| x != v).count();
        let bad = changed(whole.read(0, PAGE), GUARD)
            + changed(whole.read(PAGE + TARGET_LEN, PAGE), GUARD)
            + changed(whole.read(PAGE + TARGET_LEN - TAIL, TAIL), UNTOUCHED)
            + changed(other.read(0, PAGE), UNTOUCHED)
            + changed(gone.read(0, PAGE), UNTOUCHED);
        r.check(
            &format!("server_memory_intact_after_connection_{n}"),
            "0 bytes changed",
            &format!("{bad} bytes changed"),
        );
        must("dat_ep_free", c::ep_free(ep))?;
        if connections != 0 && n >= connections {
            return Ok(());
        }
    }
}
