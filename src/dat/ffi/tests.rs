//! The provider table called directly, as libdat2 would, with garbage handles, stale handles
//! and NULL pointers: each entry answers the DAT code with the right subtype, never crashes.

use super::codes::{arg, err};
use super::table;
use dat_sys as d;

fn provider() -> d::DAT_PROVIDER {
    table::provider(c"dr-test")
}

fn garbage() -> *mut core::ffi::c_void {
    // A pointer nobody registered (never dereferenced by the provider).
    0xdead_beef_usize as *mut core::ffi::c_void
}

#[test]
fn every_entry_of_the_table_is_a_function_and_device_name_is_the_ia_name() {
    let p = provider();
    // SAFETY: DAT_PROVIDER is 2 pointers followed by 79 function pointers (asserted in
    // dat-sys), all 8 bytes on this target.
    let words: &[usize; 2 + d::DAT_PROVIDER_FUNCTIONS] = unsafe { core::mem::transmute(&p) };
    assert!(
        words[2..].iter().all(|&w| w != 0),
        "a NULL entry in the table"
    );
    // SAFETY: device_name is the static C string given above.
    assert_eq!(
        unsafe { std::ffi::CStr::from_ptr(p.device_name) },
        c"dr-test"
    );
}

#[test]
fn garbage_handles_are_invalid_handle_with_the_subtype_of_their_kind() {
    let p = provider();
    let g = garbage();
    let mut out: d::DAT_HANDLE = core::ptr::null_mut();
    // SAFETY (all calls below): the entries are this provider's; the arguments are what a
    // consumer may pass (garbage handles are never dereferenced).
    unsafe {
        assert_eq!(
            p.pz_free_func.unwrap()(g),
            err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_PZ)
        );
        assert_eq!(
            p.ep_free_func.unwrap()(g),
            err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_EP)
        );
        assert_eq!(
            p.lmr_free_func.unwrap()(g),
            err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_LMR)
        );
        assert_eq!(
            p.cno_free_func.unwrap()(g),
            err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_CNO)
        );
        assert_eq!(
            p.srq_free_func.unwrap()(g),
            err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_SRQ)
        );
        assert_eq!(
            p.psp_free_func.unwrap()(g),
            err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_PSP)
        );
        assert_eq!(
            p.rsp_free_func.unwrap()(g),
            err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_RSP)
        );
        assert_eq!(
            p.rmr_free_func.unwrap()(g),
            err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_RMR)
        );
        assert_eq!(
            p.csp_free_func.unwrap()(g),
            err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_CSP)
        );
        assert_eq!(
            p.cr_reject_func.unwrap()(g, 0, core::ptr::null_mut()),
            err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_CR)
        );
        assert_eq!(
            p.pz_create_func.unwrap()(g, &mut out),
            err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_IA)
        );
        assert_eq!(
            p.ia_close_func.unwrap()(g, d::DAT_CLOSE_ABRUPT_FLAG),
            err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_IA)
        );
        let mut ev = d::DAT_EVENT::default();
        assert_eq!(
            p.evd_dequeue_func.unwrap()(g, &mut ev),
            err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_EVD_REQUEST)
        );
        let mut ty = 0;
        assert_eq!(
            p.get_handle_type_func.unwrap()(g, &mut ty),
            err(d::DAT_INVALID_HANDLE, 0)
        );
        let lmr = d::DAT_LMR_TRIPLET::default();
        let mut lmrs = [lmr];
        let cookie = d::DAT_DTO_COOKIE { as_64: 1 };
        assert_eq!(
            p.ep_post_send_func.unwrap()(g, 1, lmrs.as_mut_ptr(), cookie, 0),
            err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_EP)
        );
        // NULL handles are invalid too.
        assert_eq!(
            p.ep_free_func.unwrap()(core::ptr::null_mut()),
            err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_EP)
        );
    }
}

#[test]
fn null_pointers_and_unknown_names_are_rejected_with_their_argument_number() {
    let p = provider();
    let mut evd: d::DAT_EVD_HANDLE = core::ptr::null_mut();
    let mut ia: d::DAT_IA_HANDLE = core::ptr::null_mut();
    // SAFETY: NULL and valid out-pointers, as a consumer may pass them.
    unsafe {
        assert_eq!(
            p.ia_open_func.unwrap()(core::ptr::null_mut(), 8, &mut evd, &mut ia),
            arg(1)
        );
        assert_eq!(
            p.ia_open_func.unwrap()(
                c"dr-test".as_ptr() as *mut _,
                8,
                core::ptr::null_mut(),
                &mut ia
            ),
            arg(3)
        );
        assert_eq!(
            p.ia_open_func.unwrap()(
                c"dr-test".as_ptr() as *mut _,
                8,
                &mut evd,
                core::ptr::null_mut()
            ),
            arg(4)
        );
        // A name never registered by dat_provider_init.
        assert_eq!(
            p.ia_open_func.unwrap()(c"no-such-ia".as_ptr() as *mut _, 8, &mut evd, &mut ia),
            err(d::DAT_PROVIDER_NOT_FOUND, 0)
        );
        // The extension handler: a garbage EP and a NULL argument block.
        let ext = d::shim_dat_ext_args::default();
        assert_eq!(
            super::ext::handler_for_tests(garbage(), &ext),
            err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_EP)
        );
    }
}

#[test]
fn a_panic_inside_an_entry_becomes_internal_error() {
    let code = super::codes::guard(|| panic!("boom"));
    assert_eq!(code, err(d::DAT_INTERNAL_ERROR, 0));
}
