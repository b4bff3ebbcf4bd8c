//! The DAT consumer helpers of the `--api dat` clients: errors with libdat2's own words, and
//! an LMR over heap memory.

use dat_sys as d;
use dat_sys::consumer::{self as c, Handle, Lmr};

/// `what` failed with DAT return code `rc` (dat_strerror's major and minor text).
pub fn dat_err(what: &str, rc: u32) -> String {
    let (major, minor) = c::strerror(rc);
    format!("{what}: {major} {minor}")
}

/// `rc` must be DAT_SUCCESS.
pub fn must(what: &str, rc: u32) -> Result<(), String> {
    if rc == d::DAT_SUCCESS {
        Ok(())
    } else {
        Err(dat_err(what, rc))
    }
}

/// An LMR with every privilege over `len` bytes (at least 64) of zeroed heap memory.
pub fn lmr(ia: Handle, pz: Handle, len: usize) -> Result<(Lmr, &'static c::Region), String> {
    let r = c::Region::new(len.max(64), 0);
    let l = c::lmr_create(ia, pz, r, 0, r.len(), d::DAT_MEM_PRIV_ALL_FLAG)
        .map_err(|rc| dat_err("dat_lmr_create", rc))?;
    Ok((l, r))
}

/// Opens IA `name` (its async EVD of 8 entries) and a protection zone on it: (IA, PZ).
pub fn open_ia(name: &str) -> Result<(Handle, Handle), String> {
    let (mut ia, mut async_evd) = (Handle::NULL, Handle::NULL);
    must(
        "dat_ia_open",
        c::ia_open(name, 8, Some(&mut async_evd), Some(&mut ia)),
    )?;
    let mut pz = Handle::NULL;
    must("dat_pz_create", c::pz_create(ia, Some(&mut pz)))?;
    Ok((ia, pz))
}

/// An EVD of `qlen` entries with `flags` (DAT_EVD_*_FLAG) on `ia`.
pub fn evd(ia: Handle, qlen: i32, flags: u32) -> Result<Handle, String> {
    let mut h = Handle::NULL;
    must(
        "dat_evd_create",
        c::evd_create(ia, qlen, flags, Some(&mut h)),
    )?;
    Ok(h)
}
