//! The DAT consumer helpers of the `--api dat` clients: errors with libdat2's own words, and
//! an LMR over heap memory.

use dat_sys as d;
use dpdk_roce::dat::ffi::consumer::{self as c, Handle, Lmr};

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
