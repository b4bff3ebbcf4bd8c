//! DAT return codes (dat_error.h): the mapping of [`DatError`] and the panic guard of every
//! entry (a panic never unwinds into C: it becomes DAT_INTERNAL_ERROR).

use crate::dat::DatError;
use dat_sys as d;

/// What an entry's body returns: Ok = DAT_SUCCESS, Err = the DAT_RETURN.
pub(crate) type R = Result<(), u32>;

/// `DAT_ERROR(type, subtype)`.
pub(crate) const fn err(ty: u32, sub: u32) -> u32 {
    d::dat_error(ty, sub)
}

/// DAT_INVALID_PARAMETER naming argument `n` (1-based, DAT_INVALID_ARGn).
pub(crate) const fn arg(n: u32) -> u32 {
    err(d::DAT_INVALID_PARAMETER, d::DAT_INVALID_ARG1 + n - 1)
}

/// A DAT_BOOLEAN.
pub(crate) const fn boolean(v: bool) -> u32 {
    if v {
        d::DAT_TRUE
    } else {
        d::DAT_FALSE
    }
}

/// DAT_INVALID_HANDLE naming handle argument `n` (DAT_INVALID_HANDLEn).
pub(crate) const fn handle_arg(n: u32) -> u32 {
    err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE1 + n - 1)
}

/// The DAT_RETURN of a Rust API error; `param` is the argument number an
/// InvalidParameter is reported against (0: none known).
pub(crate) fn map(e: &DatError, param: u32) -> u32 {
    match e {
        DatError::InvalidParameter(_) if param > 0 => arg(param),
        _ => e.code(),
    }
}

/// Whether failed calls are logged (`DPDK_ROCE_LOG=dpdk_roce::dat::call=debug` or
/// `DPDK_ROCE_DAT_TRACE`; see `crate::log`).
pub(crate) fn trace_on() -> bool {
    tracing::enabled!(target: "dpdk_roce::dat::call", tracing::Level::DEBUG)
}

/// Runs an entry's body: its result as a DAT_RETURN, a panic as DAT_INTERNAL_ERROR. A failure
/// is logged at debug with the entry's source location (target `dpdk_roce::dat::call`).
#[track_caller]
pub(crate) fn guard(f: impl FnOnce() -> R) -> d::DAT_RETURN {
    let at = std::panic::Location::caller();
    let code = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(Ok(())) => d::DAT_SUCCESS,
        Ok(Err(code)) => code,
        Err(_) => {
            tracing::error!(target: "dpdk_roce::dat::call", %at, "a DAT call panicked");
            err(d::DAT_INTERNAL_ERROR, 0)
        }
    };
    if code != d::DAT_SUCCESS && code != d::DAT_QUEUE_EMPTY {
        tracing::debug!(target: "dpdk_roce::dat::call", %at, "DAT call failed: {code:#x}");
    }
    code
}

/// Checks an out-pointer: DAT_INVALID_PARAMETER of argument `n` when NULL.
pub(crate) fn nonnull<T>(p: *mut T, n: u32) -> Result<*mut T, u32> {
    if p.is_null() {
        Err(arg(n))
    } else {
        Ok(p)
    }
}

/// Writes `v` through an out-pointer checked by [`nonnull`].
///
/// # Safety
/// `p` is NULL or valid for writes of a `T` (and aligned for it) for the duration of the call.
pub(crate) unsafe fn put<T>(p: *mut T, n: u32, v: T) -> R {
    let p = nonnull(p, n)?;
    // SAFETY: `p` is writable and aligned for a `T` (this fn's contract); NULL was rejected
    // above.
    unsafe { p.write(v) };
    Ok(())
}
