//! The DAT 2.0 C provider that libdat2 loads (`dat.conf`: `<ia_name> u2.0 nonthreadsafe
//! default <path>/libdpdk_roce.so dapl.2.0 "<profile.toml>" ""`), docs/REFERENCE-dat.md.
//!
//! * [`dat_provider_init`] registers one static `DAT_PROVIDER` table per IA name with
//!   `dat_registry_add_provider` and remembers the name's `ia_params` (the dpdk-config profile
//!   path); [`dat_provider_fini`] removes it. The library is linked `-z nodelete` (build.rs):
//!   libdat2 `dlclose`s it after the last IA closes, and EAL lives for the process.
//! * Every one of the 79 entries is a real function (`table`); handles are registry entries
//!   (`handles`) whose header starts with the `DAT_PROVIDER*`.
//! * Every entry runs under `codes::guard`: a panic becomes DAT_INTERNAL_ERROR.
//! * Every entry is an `unsafe extern "C" fn` with one safety contract, the DAT 2.0 API's:
//!   each pointer argument is NULL or valid for what the call's man page does with it (an
//!   out-pointer writable for its type, an IOV readable for its count of triplets, private
//!   data readable for its size, a name a terminated C string), for the duration of the call.
//!   Handles may be anything: they are looked up in `handles`, never dereferenced.
//! * The helpers that read or write consumer memory through a pointer argument (`codes::put`,
//!   `ep::triplets`, `ep::private_data`, ...) are `unsafe fn`s whose `# Safety` section states
//!   what the pointer must be; each call sits in its own `unsafe` block whose SAFETY comment
//!   names the entry's argument and man page (or the caller's own contract) that meets it.
//!   Helpers that only compare a pointer with NULL (`codes::nonnull`) or look a handle up
//!   (`handles`) are safe.
//! * The IB extensions (RDMA write with immediate, compare-and-swap, fetch-and-add) arrive
//!   through dat-sys's C shim, which unpacks the `va_list` for `ext`.
// Every unsafe call inside an entry point sits in its own block with its SAFETY comment.
#![deny(unsafe_op_in_unsafe_fn)]

mod cm;
pub(crate) mod codes;
mod ep;
mod evd;
mod event;
mod ext;
pub(crate) mod handles;
mod ia;
mod mem;
mod objects;
mod sockaddr;
mod srq;
mod state;
mod table;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_pair;

use dat_sys as d;
use state::lock;
use std::collections::HashMap;
use std::ffi::{c_char, CStr};
use std::sync::{Mutex, OnceLock};

/// A registered IA name: its table and its `ia_params`.
struct Registered {
    provider: &'static d::DAT_PROVIDER,
    params: String,
}

// SAFETY: the table is immutable after construction and only holds function pointers and a
// pointer to a leaked, immutable C string.
unsafe impl Send for Registered {}

fn names() -> &'static Mutex<HashMap<String, Registered>> {
    static NAMES: OnceLock<Mutex<HashMap<String, Registered>>> = OnceLock::new();
    NAMES.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The provider table and `ia_params` of `name`.
pub(crate) fn lookup(name: &str) -> Option<(*const d::DAT_PROVIDER, String)> {
    lock(names())
        .get(name)
        .map(|r| (r.provider as *const d::DAT_PROVIDER, r.params.clone()))
}

fn provider_for(name: &str, params: &str) -> *const d::DAT_PROVIDER {
    let mut names = lock(names());
    let entry = names.entry(name.to_string()).or_insert_with(|| {
        let device = std::ffi::CString::new(name).unwrap_or_default();
        Registered {
            provider: Box::leak(Box::new(table::provider(Box::leak(
                device.into_boxed_c_str(),
            )))),
            params: String::new(),
        }
    });
    entry.params = params.to_string();
    entry.provider
}

/// Called by libdat2 after `dlopen` for each `dat.conf` line naming this library.
///
/// # Safety
/// `info` points at a valid DAT_PROVIDER_INFO and `ia_params` at a C string or is NULL.
#[no_mangle]
pub unsafe extern "C" fn dat_provider_init(
    info: *const d::DAT_PROVIDER_INFO,
    ia_params: *const c_char,
) {
    let _ = std::panic::catch_unwind(|| {
        crate::log::init_provider();
        if info.is_null() {
            return;
        }
        // SAFETY: libdat2 passes its provider info (a NUL-terminated ia_name array).
        let name = unsafe { CStr::from_ptr((*info).ia_name.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        let params = if ia_params.is_null() {
            String::new()
        } else {
            // SAFETY: libdat2 passes the dat.conf ia_params as a C string.
            unsafe { CStr::from_ptr(ia_params) }
                .to_string_lossy()
                .into_owned()
        };
        let provider = provider_for(&name, &params);
        ext::install();
        // SAFETY: the table is 'static (leaked) and `info` is libdat2's.
        let rc = unsafe { d::dat_registry_add_provider(provider, info) };
        if rc != d::DAT_SUCCESS {
            tracing::error!("dat_registry_add_provider({name}) failed: {rc:#x}");
        }
    });
}

/// Called by libdat2 before `dlclose` (after the last IA of the name closed).
///
/// # Safety
/// `info` points at a valid DAT_PROVIDER_INFO.
#[no_mangle]
pub unsafe extern "C" fn dat_provider_fini(info: *const d::DAT_PROVIDER_INFO) {
    let _ = std::panic::catch_unwind(|| {
        if info.is_null() {
            return;
        }
        // SAFETY: as in init.
        let name = unsafe { CStr::from_ptr((*info).ia_name.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        if let Some((provider, _)) = lookup(&name) {
            // SAFETY: the table registered by init, still 'static.
            let _ = unsafe { d::dat_registry_remove_provider(provider, info) };
        }
    });
}
