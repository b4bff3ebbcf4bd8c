//! The consumer side of the DAT 2.0 API, as a DAT program sees it: safe wrappers over the
//! libdat2 entry points (`dat_ia_openv`, `dat_ep_post_send`, ...) that dispatch through the
//! registry to whatever provider `dat.conf` names (for dpdk-roce's DAT programs,
//! `roce-dat-consumer` and the `--api dat` benchmarks: dpdk-roce's C provider, loaded by
//! libdat2 from `libdpdk_roce.so`). It lives beside the bindings, out of the provider library.
//!
//! Every call returns the raw `DAT_RETURN` so that bad-input cases can compare it with the
//! code dat.h and the man pages name. Out-pointers are `Option<&mut T>`: `None` passes NULL.
//!
//! Soundness: a [`Handle`] is only ever a value a DAT call returned, `DAT_HANDLE_NULL`, or a
//! [`Forged`] copy of a real handle's first word in memory this module owns. libdat2
//! dereferences a non-NULL handle's first word (the `DAT_PROVIDER*`, udat_redirection.h), so a
//! handle must point at readable memory: this provider keeps every handle header readable and
//! pointing at its table even after the object is freed (`handles::remove`), which makes stale
//! handles sound to pass too. With another provider, pass only handles it returned.

use crate as d;
use std::ffi::{c_void, CStr, CString};
use std::net::IpAddr;

/// DAT_TIMEOUT_INFINITE.
pub const INFINITE: u32 = u32::MAX;

/// An opaque DAT handle (any kind).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Handle(usize);

impl Handle {
    /// DAT_HANDLE_NULL.
    pub const NULL: Handle = Handle(0);

    fn raw(self) -> *mut c_void {
        self.0 as *mut c_void
    }

    fn from_raw(p: *mut c_void) -> Handle {
        Handle(p as usize)
    }

    pub fn is_null(self) -> bool {
        self.0 == 0
    }

    /// An IA handle libdat2 never issued: its IA handles are indices into its own table
    /// (bounds-checked by `dats_get_ia_handle`, never dereferenced), so any small number is
    /// safe to pass.
    pub fn unissued_ia(index: u16) -> Handle {
        Handle(usize::from(index))
    }
}

/// A handle nobody created: a heap word holding a real handle's first word (its
/// `DAT_PROVIDER*`), so libdat2 dispatches it to the provider, which must reject it.
pub struct Forged(Box<[usize; 2]>);

impl Forged {
    /// A forgery of `real` (which must be a live non-IA handle: IA handles are libdat2's
    /// small integers, not pointers).
    pub fn of(real: Handle) -> Option<Forged> {
        if real.is_null() || real.0 < 0x10000 {
            return None;
        }
        // SAFETY: `real` is a non-IA handle a DAT call returned: a pointer to the provider's
        // header, which stays readable for the life of the process (see module doc).
        let word = unsafe { (real.0 as *const usize).read() };
        Some(Forged(Box::new([word, 0])))
    }

    pub fn handle(&self) -> Handle {
        Handle(self.0.as_ptr() as usize)
    }
}

/// `slot` as an out-pointer when the caller asked for the value, else NULL (the bad-input
/// cases pass NULL out-pointers on purpose).
fn out_ptr<T>(wanted: bool, slot: &mut T) -> *mut T {
    if wanted {
        slot
    } else {
        core::ptr::null_mut()
    }
}

/// The names of a DAT_RETURN (dat_strerror): major and minor.
pub fn strerror(code: u32) -> (String, String) {
    let mut major: *const std::ffi::c_char = core::ptr::null();
    let mut minor: *const std::ffi::c_char = core::ptr::null();
    // SAFETY: dat_strerror writes two pointers to static strings.
    let rc = unsafe { d::dat_strerror(code, &mut major, &mut minor) };
    let s = |p: *const std::ffi::c_char| {
        if rc != d::DAT_SUCCESS || p.is_null() {
            String::new()
        } else {
            // SAFETY: a static NUL-terminated string of libdat2.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        }
    };
    (s(major), s(minor))
}

/// dat_ia_open (dat.h: `dat_ia_openv` with this header's version, not thread safe).
/// `async_evd` is IN/OUT: a NULL handle asks for a new async EVD, another IA's async EVD is
/// given to the provider to share.
pub fn ia_open(
    name: &str,
    qlen: i32,
    async_evd: Option<&mut Handle>,
    ia: Option<&mut Handle>,
) -> u32 {
    let Ok(name) = CString::new(name) else {
        return d::dat_error(d::DAT_INVALID_PARAMETER, d::DAT_INVALID_ARG1);
    };
    let mut evd: d::DAT_EVD_HANDLE = async_evd
        .as_deref()
        .map_or(core::ptr::null_mut(), |h| h.raw());
    let mut h: d::DAT_IA_HANDLE = core::ptr::null_mut();
    let evd_p = out_ptr(async_evd.is_some(), &mut evd);
    let ia_p = out_ptr(ia.is_some(), &mut h);
    // SAFETY: a C string and valid (or NULL) out-pointers.
    let rc = unsafe {
        d::dat_ia_openv(
            name.as_ptr() as *mut _,
            qlen,
            evd_p,
            ia_p,
            d::DAT_VERSION_MAJOR,
            d::DAT_VERSION_MINOR,
            d::DAT_FALSE,
        )
    };
    if let Some(a) = async_evd {
        *a = Handle::from_raw(evd);
    }
    if let Some(i) = ia {
        *i = Handle::from_raw(h);
    }
    rc
}

/// dat_ia_close.
pub fn ia_close(ia: Handle, abrupt: bool) -> u32 {
    let flags = if abrupt {
        d::DAT_CLOSE_ABRUPT_FLAG
    } else {
        d::DAT_CLOSE_GRACEFUL_FLAG
    };
    // SAFETY: see the module doc on handles.
    unsafe { d::dat_ia_close(ia.raw(), flags) }
}

/// dat_pz_create.
pub fn pz_create(ia: Handle, pz: Option<&mut Handle>) -> u32 {
    let mut h: d::DAT_PZ_HANDLE = core::ptr::null_mut();
    let p = out_ptr(pz.is_some(), &mut h);
    // SAFETY: see the module doc on handles; `p` is valid or NULL.
    let rc = unsafe { d::dat_pz_create(ia.raw(), p) };
    if let Some(o) = pz {
        *o = Handle::from_raw(h);
    }
    rc
}

/// dat_pz_free.
pub fn pz_free(pz: Handle) -> u32 {
    // SAFETY: see the module doc on handles.
    unsafe { d::dat_pz_free(pz.raw()) }
}

/// dat_get_handle_type.
pub fn get_handle_type(h: Handle, ty: Option<&mut u32>) -> u32 {
    let mut t: d::DAT_HANDLE_TYPE = 0;
    let p = out_ptr(ty.is_some(), &mut t);
    // SAFETY: see the module doc on handles; `p` is valid or NULL.
    let rc = unsafe { d::dat_get_handle_type(h.raw(), p) };
    if let Some(o) = ty {
        *o = t;
    }
    rc
}

/// dat_evd_create (`flags`: DAT_EVD_*_FLAG), no CNO.
pub fn evd_create(ia: Handle, qlen: i32, flags: u32, evd: Option<&mut Handle>) -> u32 {
    let mut h: d::DAT_EVD_HANDLE = core::ptr::null_mut();
    let p = out_ptr(evd.is_some(), &mut h);
    // SAFETY: see the module doc on handles; `p` is valid or NULL.
    let rc = unsafe { d::dat_evd_create(ia.raw(), qlen, core::ptr::null_mut(), flags as _, p) };
    if let Some(o) = evd {
        *o = Handle::from_raw(h);
    }
    rc
}

/// dat_evd_free.
pub fn evd_free(evd: Handle) -> u32 {
    // SAFETY: see the module doc on handles.
    unsafe { d::dat_evd_free(evd.raw()) }
}

/// A dequeued event, decoded by its number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// DAT_DTO_COMPLETION_EVENT, or an IB extension DTO (DAT_IB_DTO_EVENT): then `imm` is
    /// the immediate data a receive consumed (a SEND or RDMA WRITE with immediate).
    Dto {
        ep: Handle,
        cookie: u64,
        status: u32,
        len: u32,
        imm: Option<u32>,
    },
    /// DAT_CONNECTION_REQUEST_EVENT.
    ConnectionRequest { cr: Handle },
    /// A connection event (ESTABLISHED, PEER_REJECTED, BROKEN, ...): its number.
    Connection {
        number: u32,
        ep: Handle,
        private_data: Vec<u8>,
    },
    /// Anything else: its number.
    Other(u32),
}

fn decode(ev: &d::DAT_EVENT) -> Event {
    let n = ev.event_number;
    // SAFETY (each arm): the event number says which member of the union the provider wrote
    // (dat.h), an extension DTO's extension data is a DAT_IB_EXTENSION_EVENT_DATA (read
    // unaligned from the event's 64-byte area; dat_ib_extensions.h), and connection private
    // data is `private_data_size` readable bytes.
    unsafe {
        // An IB extension DTO (atomics, immediate data) carries the DTO data too
        // (dat_ib_extensions.h).
        if n == d::DAT_DTO_COMPLETION_EVENT || n == d::DAT_IB_DTO_EVENT {
            let x = &ev.event_data.dto_completion_event_data;
            let imm = if n == d::DAT_IB_DTO_EVENT {
                // The extension data is the provider's DAT_IB_EXTENSION_EVENT_DATA.
                let ext = (ev.event_extension_data.as_ptr()
                    as *const d::DAT_IB_EXTENSION_EVENT_DATA)
                    .read_unaligned();
                matches!(
                    ext.type_,
                    d::DAT_IB_RDMA_WRITE_IMMED_DATA | d::DAT_IB_RECV_IMMED_DATA
                )
                .then_some(ext.val.immed.data)
            } else {
                None
            };
            Event::Dto {
                ep: Handle::from_raw(x.ep_handle),
                cookie: x.user_cookie.as_64,
                status: x.status,
                len: x.transfered_length,
                imm,
            }
        } else if n == d::DAT_CONNECTION_REQUEST_EVENT {
            Event::ConnectionRequest {
                cr: Handle::from_raw(ev.event_data.cr_arrival_event_data.cr_handle),
            }
        } else if (d::DAT_CONNECTION_EVENT_ESTABLISHED..=d::DAT_CONNECTION_EVENT_UNREACHABLE)
            .contains(&n)
        {
            let x = &ev.event_data.connect_event_data;
            let pd = if x.private_data.is_null() || x.private_data_size <= 0 {
                Vec::new()
            } else {
                core::slice::from_raw_parts(
                    x.private_data as *const u8,
                    x.private_data_size as usize,
                )
                .to_vec()
            };
            Event::Connection {
                number: n,
                ep: Handle::from_raw(x.ep_handle),
                private_data: pd,
            }
        } else {
            Event::Other(n)
        }
    }
}

/// dat_evd_wait with threshold 1 (`timeout_us`: microseconds or [`INFINITE`]); `event: false`
/// passes a NULL event pointer.
pub fn evd_wait(evd: Handle, timeout_us: u32, event: bool) -> Result<Event, u32> {
    let mut ev = d::DAT_EVENT::default();
    let mut nmore: d::DAT_COUNT = 0;
    let p = if event {
        &mut ev as *mut _
    } else {
        core::ptr::null_mut()
    };
    // SAFETY: see the module doc on handles; `p` valid or NULL, `nmore` valid.
    let rc = unsafe { d::dat_evd_wait(evd.raw(), timeout_us, 1, p, &mut nmore) };
    if rc == d::DAT_SUCCESS {
        Ok(decode(&ev))
    } else {
        Err(rc)
    }
}

/// dat_evd_dequeue.
pub fn evd_dequeue(evd: Handle) -> Result<Event, u32> {
    let mut ev = d::DAT_EVENT::default();
    // SAFETY: see the module doc on handles; `ev` is valid.
    let rc = unsafe { d::dat_evd_dequeue(evd.raw(), &mut ev) };
    if rc == d::DAT_SUCCESS {
        Ok(decode(&ev))
    } else {
        Err(rc)
    }
}

/// A registered region: handle, contexts and range.
#[derive(Clone, Copy, Debug)]
pub struct Lmr {
    pub handle: Handle,
    pub lmr_context: u32,
    pub rmr_context: u32,
    /// The registered range.
    pub addr: u64,
    pub len: u32,
}

impl Lmr {
    /// The segment `len` bytes at `off` of this LMR (not checked: bad segments are cases).
    pub fn seg(&self, off: u64, len: u32) -> Segment {
        Segment {
            addr: self.addr + off,
            len,
            lmr_context: self.lmr_context,
        }
    }

    /// The remote view of `len` bytes at `off`.
    pub fn remote(&self, off: u64, len: u32) -> Remote {
        Remote {
            addr: self.addr + off,
            len,
            rmr_context: self.rmr_context,
        }
    }
}

/// Consumer memory to register: a leaked allocation the provider may read and write at any
/// time (as a DAT consumer's buffer), so this process only touches it through volatile
/// copies, never through references.
pub struct Region {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the region is only accessed through volatile byte copies (`read`, `write`); the
// pointer is a leaked allocation valid for the life of the process.
unsafe impl Sync for Region {}
// SAFETY: as above.
unsafe impl Send for Region {}

impl Region {
    /// `len` bytes of `fill`, leaked (registered memory must outlive every LMR and every
    /// in-flight access; the process never frees it).
    pub fn new(len: usize, fill: u8) -> &'static Region {
        let b: &'static mut [u8] = Box::leak(vec![fill; len].into_boxed_slice());
        Box::leak(Box::new(Region {
            ptr: b.as_mut_ptr(),
            len,
        }))
    }

    pub fn addr(&self) -> u64 {
        self.ptr as u64
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A copy of `len` bytes at `off` (clamped to the region).
    pub fn read(&self, off: usize, len: usize) -> Vec<u8> {
        let end = off.saturating_add(len).min(self.len);
        (off.min(end)..end)
            // SAFETY: `i < self.len`: inside the leaked allocation; volatile because the
            // provider may write it concurrently.
            .map(|i| unsafe { self.ptr.add(i).read_volatile() })
            .collect()
    }

    /// Writes `data` at `off` (clamped to the region).
    pub fn write(&self, off: usize, data: &[u8]) {
        for (i, &b) in data.iter().enumerate() {
            let at = off.saturating_add(i);
            if at >= self.len {
                break;
            }
            // SAFETY: `at < self.len`: inside the leaked allocation.
            unsafe { self.ptr.add(at).write_volatile(b) };
        }
    }
}

/// dat_lmr_create of a DAT_MEM_TYPE_VIRTUAL region: `len` bytes of `region` at `off`
/// (clamped), with `privileges` (DAT_MEM_PRIV_*).
pub fn lmr_create(
    ia: Handle,
    pz: Handle,
    region: &'static Region,
    off: usize,
    len: usize,
    privileges: u32,
) -> Result<Lmr, u32> {
    let off = off.min(region.len);
    let len = len.min(region.len - off);
    let mut h: d::DAT_LMR_HANDLE = core::ptr::null_mut();
    let mut lctx: d::DAT_LMR_CONTEXT = 0;
    let mut rctx: d::DAT_RMR_CONTEXT = 0;
    let mut reg_len: d::DAT_VLEN = 0;
    let mut reg_addr: d::DAT_VADDR = 0;
    let desc = d::DAT_REGION_DESCRIPTION {
        // SAFETY: `off <= region.len`: inside (or one past) the leaked allocation.
        for_va: unsafe { region.ptr.add(off) } as *mut c_void,
    };
    // SAFETY: the region is leaked memory the provider may read and write for the life of the
    // process; the out-pointers are valid.
    let rc = unsafe {
        d::dat_lmr_create(
            ia.raw(),
            d::DAT_MEM_TYPE_VIRTUAL,
            desc,
            len as d::DAT_VLEN,
            pz.raw(),
            privileges as _,
            d::DAT_VA_TYPE_VA,
            &mut h,
            &mut lctx,
            &mut rctx,
            &mut reg_len,
            &mut reg_addr,
        )
    };
    if rc == d::DAT_SUCCESS {
        Ok(Lmr {
            handle: Handle::from_raw(h),
            lmr_context: lctx,
            rmr_context: rctx,
            addr: region.addr() + off as u64,
            len: len as u32,
        })
    } else {
        Err(rc)
    }
}

/// dat_lmr_free.
pub fn lmr_free(lmr: Handle) -> u32 {
    // SAFETY: see the module doc on handles.
    unsafe { d::dat_lmr_free(lmr.raw()) }
}

/// The EP attributes this module lets a consumer set (the rest: provider defaults).
#[derive(Clone, Copy, Debug)]
pub struct EpAttr {
    pub max_recv_dtos: i32,
    pub max_request_dtos: i32,
    pub max_recv_iov: i32,
    pub max_request_iov: i32,
}

/// dat_ep_create (`attr: None`: NULL, the provider's defaults).
pub fn ep_create(
    ia: Handle,
    pz: Handle,
    recv_evd: Handle,
    request_evd: Handle,
    connect_evd: Handle,
    attr: Option<EpAttr>,
    ep: Option<&mut Handle>,
) -> u32 {
    let mut a = d::DAT_EP_ATTR {
        service_type: d::DAT_SERVICE_TYPE_RC,
        max_message_size: 1 << 20,
        max_rdma_size: 1 << 20,
        qos: d::DAT_QOS_BEST_EFFORT,
        recv_completion_flags: d::DAT_COMPLETION_DEFAULT_FLAG,
        request_completion_flags: d::DAT_COMPLETION_DEFAULT_FLAG,
        max_rdma_read_in: 4,
        max_rdma_read_out: 4,
        max_rdma_read_iov: 1,
        max_rdma_write_iov: 4,
        ..Default::default()
    };
    let ap = match attr {
        Some(x) => {
            a.max_recv_dtos = x.max_recv_dtos;
            a.max_request_dtos = x.max_request_dtos;
            a.max_recv_iov = x.max_recv_iov;
            a.max_request_iov = x.max_request_iov;
            &mut a as *mut d::DAT_EP_ATTR
        }
        None => core::ptr::null_mut(),
    };
    let mut h: d::DAT_EP_HANDLE = core::ptr::null_mut();
    let p = out_ptr(ep.is_some(), &mut h);
    // SAFETY: see the module doc on handles; `ap` and `p` are valid or NULL.
    let rc = unsafe {
        d::dat_ep_create(
            ia.raw(),
            pz.raw(),
            recv_evd.raw(),
            request_evd.raw(),
            connect_evd.raw(),
            ap,
            p,
        )
    };
    if let Some(o) = ep {
        *o = Handle::from_raw(h);
    }
    rc
}

/// dat_ep_free.
pub fn ep_free(ep: Handle) -> u32 {
    // SAFETY: see the module doc on handles.
    unsafe { d::dat_ep_free(ep.raw()) }
}

/// `struct sockaddr_in` and `struct sockaddr_in6` (netinet/in.h) in one buffer: family and
/// port, then the IPv4 address and zeros, or the flow information, the IPv6 address and the
/// scope ID.
#[repr(C, align(4))]
struct SockAddr {
    family: u16,
    port_be: u16,
    rest: [u8; 24],
}

impl SockAddr {
    fn new(ip: IpAddr) -> SockAddr {
        let mut rest = [0u8; 24];
        let family = match ip {
            IpAddr::V4(v4) => {
                rest[..4].copy_from_slice(&v4.octets());
                2 // AF_INET
            }
            IpAddr::V6(v6) => {
                rest[4..20].copy_from_slice(&v6.octets());
                10 // AF_INET6
            }
        };
        SockAddr {
            family,
            port_be: 0,
            rest,
        }
    }
}

/// dat_ep_connect to `ip` (a `sockaddr_in` or `sockaddr_in6`), `conn_qual`, `timeout_us`
/// ([`INFINITE`] or µs).
pub fn ep_connect(
    ep: Handle,
    ip: impl Into<IpAddr>,
    conn_qual: u64,
    timeout_us: u32,
    pdata: &[u8],
) -> u32 {
    let mut sa = SockAddr::new(ip.into());
    // SAFETY: see the module doc on handles; `sa` is a sockaddr_in or sockaddr_in6 as its
    // family says, `pdata` readable.
    unsafe {
        d::dat_ep_connect(
            ep.raw(),
            &mut sa as *mut SockAddr as d::DAT_IA_ADDRESS_PTR,
            conn_qual,
            timeout_us,
            pdata.len() as i32,
            pdata.as_ptr() as *mut c_void,
            d::DAT_QOS_BEST_EFFORT,
            d::DAT_CONNECT_DEFAULT_FLAG,
        )
    }
}

/// dat_ep_disconnect (abrupt or graceful).
pub fn ep_disconnect(ep: Handle, abrupt: bool) -> u32 {
    let flags = if abrupt {
        d::DAT_CLOSE_ABRUPT_FLAG
    } else {
        d::DAT_CLOSE_GRACEFUL_FLAG
    };
    // SAFETY: see the module doc on handles.
    unsafe { d::dat_ep_disconnect(ep.raw(), flags) }
}

/// dat_ep_get_status: the EP's state (DAT_EP_STATE_*).
pub fn ep_state(ep: Handle) -> Result<u32, u32> {
    match ep_get_status_some(ep, [true; 3]) {
        (d::DAT_SUCCESS, [Some(state), ..]) => Ok(state),
        (rc, _) => Err(rc),
    }
}

/// dat_ep_get_status with each output present or NULL (`want`: state, recv_idle,
/// request_idle); the return code and the outputs written (`None` where NULL was passed).
pub fn ep_get_status_some(ep: Handle, want: [bool; 3]) -> (u32, [Option<u32>; 3]) {
    let mut v: [u32; 3] = [u32::MAX; 3];
    let [a, b, c] = &mut v;
    let p = |x: &mut u32, w: bool| {
        if w {
            x as *mut u32
        } else {
            core::ptr::null_mut()
        }
    };
    // SAFETY: see the module doc on handles; each out-pointer is valid or NULL.
    let rc = unsafe {
        d::dat_ep_get_status(
            ep.raw(),
            p(a, want[0]) as *mut d::DAT_EP_STATE,
            p(b, want[1]) as *mut d::DAT_BOOLEAN,
            p(c, want[2]) as *mut d::DAT_BOOLEAN,
        )
    };
    let out = |i: usize| (want[i] && v[i] != u32::MAX).then_some(v[i]);
    (rc, [out(0), out(1), out(2)])
}

/// dat_ep_set_watermark.
pub fn ep_set_watermark(ep: Handle, soft: i32, hard: i32) -> u32 {
    // SAFETY: see the module doc on handles.
    unsafe { d::dat_ep_set_watermark(ep.raw(), soft, hard) }
}

/// dat_ep_modify with `mask` and the parameters of `param` (`None`: a NULL pointer).
pub fn ep_modify(ep: Handle, mask: u64, param: Option<&d::DAT_EP_PARAM>) -> u32 {
    let p = param.map_or(core::ptr::null(), |p| p as *const d::DAT_EP_PARAM);
    // SAFETY: see the module doc on handles; `p` is valid or NULL.
    unsafe { d::dat_ep_modify(ep.raw(), mask, p) }
}

/// dat_ep_query of every parameter (the return code when the call fails).
pub fn ep_query(ep: Handle) -> Result<d::DAT_EP_PARAM, u32> {
    let mut p = d::DAT_EP_PARAM::default();
    // SAFETY: see the module doc on handles; `p` is valid.
    let rc = unsafe { d::dat_ep_query(ep.raw(), 0, &mut p) };
    if rc == d::DAT_SUCCESS {
        Ok(p)
    } else {
        Err(rc)
    }
}

/// dat_ep_recv_query with each output present or NULL (`want`: nbufs_allocated,
/// bufs_alloc_span); the return code and the values written.
pub fn ep_recv_query_some(ep: Handle, want: [bool; 2]) -> (u32, [Option<i32>; 2]) {
    let mut v: [i32; 2] = [i32::MIN; 2];
    let [a, b] = &mut v;
    let p = |x: &mut i32, w: bool| {
        if w {
            x as *mut i32
        } else {
            core::ptr::null_mut()
        }
    };
    // SAFETY: see the module doc on handles; each out-pointer is valid or NULL.
    let rc = unsafe { d::dat_ep_recv_query(ep.raw(), p(a, want[0]), p(b, want[1])) };
    let out = |i: usize| (want[i] && v[i] != i32::MIN).then_some(v[i]);
    (rc, [out(0), out(1)])
}

/// dat_ib_post_fetch_and_add (dat_ib_extensions.h): adds `add` to the 8 bytes at `remote`
/// and returns their old value into `local` (8 bytes), through libdat2's
/// `dat_extension_op`.
pub fn ep_post_fetch_add(
    ep: Handle,
    add: u64,
    local: Segment,
    cookie: u64,
    remote: Remote,
    flags: u32,
) -> u32 {
    let iov = triplets(Some(&[local]));
    let rmr = d::DAT_RMR_TRIPLET {
        rmr_context: remote.rmr_context,
        virtual_address: remote.addr,
        segment_length: remote.len,
    };
    // SAFETY: see the module doc on handles; the variadic arguments are those of the
    // dat_ib_post_fetch_and_add macro in its order and C types (the DAT_DTO_COOKIE union is
    // passed as its 64 bits), and `iov` / `rmr` outlive the call.
    unsafe {
        d::dat_extension_op(
            ep.raw(),
            d::DAT_IB_FETCH_AND_ADD_OP as d::DAT_EXTENDED_OP,
            add,
            iov.as_ptr(),
            cookie,
            &rmr as *const d::DAT_RMR_TRIPLET,
            flags,
        )
    }
}

/// dat_ib_post_rdma_write_immed (dat_ib_extensions.h): writes `iov` (possibly none) to
/// `remote` and consumes a receive of the peer with the immediate data `imm`, through
/// libdat2's `dat_extension_op`.
pub fn ep_post_write_immed(
    ep: Handle,
    iov: &[Segment],
    cookie: u64,
    remote: Remote,
    imm: u32,
    flags: u32,
) -> u32 {
    let mut t = triplets(Some(iov));
    let p = if t.is_empty() {
        core::ptr::null_mut()
    } else {
        t.as_mut_ptr()
    };
    let rmr = d::DAT_RMR_TRIPLET {
        rmr_context: remote.rmr_context,
        virtual_address: remote.addr,
        segment_length: remote.len,
    };
    // SAFETY: see the module doc on handles; the variadic arguments are those of the
    // dat_ib_post_rdma_write_immed macro in its order and C types (the DAT_DTO_COOKIE union
    // is passed as its 64 bits), `p` is NULL or `t.len()` triplets, and `t` / `rmr` outlive
    // the call.
    unsafe {
        d::dat_extension_op(
            ep.raw(),
            d::DAT_IB_RDMA_WRITE_IMMED_OP as d::DAT_EXTENDED_OP,
            t.len() as d::DAT_COUNT,
            p,
            cookie,
            &rmr as *const d::DAT_RMR_TRIPLET,
            imm,
            flags,
        )
    }
}

/// One local segment (DAT_LMR_TRIPLET). Any value is safe to pass: the provider checks the
/// segment against its registration table before touching memory.
#[derive(Clone, Copy, Debug, Default)]
pub struct Segment {
    pub addr: u64,
    pub len: u32,
    pub lmr_context: u32,
}

/// A remote region (DAT_RMR_TRIPLET).
#[derive(Clone, Copy, Debug, Default)]
pub struct Remote {
    pub addr: u64,
    pub len: u32,
    pub rmr_context: u32,
}

fn triplets(iov: Option<&[Segment]>) -> Vec<d::DAT_LMR_TRIPLET> {
    iov.unwrap_or(&[])
        .iter()
        .map(|s| d::DAT_LMR_TRIPLET {
            virtual_address: s.addr,
            segment_length: s.len,
            lmr_context: s.lmr_context,
        })
        .collect()
}

/// dat_ep_post_send; `iov: None` passes NULL with `count` segments.
pub fn ep_post_send(
    ep: Handle,
    iov: Option<&[Segment]>,
    count: i32,
    cookie: u64,
    flags: u32,
) -> u32 {
    let mut t = triplets(iov);
    let p = if iov.is_some() {
        t.as_mut_ptr()
    } else {
        core::ptr::null_mut()
    };
    if iov.is_some() && count >= 0 && count as usize > t.len() {
        return d::dat_error(d::DAT_INVALID_PARAMETER, d::DAT_INVALID_ARG2);
    }
    // SAFETY: see the module doc on handles; `p` is NULL or `count` triplets.
    unsafe {
        d::dat_ep_post_send(
            ep.raw(),
            count,
            p,
            d::DAT_DTO_COOKIE { as_64: cookie },
            flags as _,
        )
    }
}

/// dat_ep_post_recv; `iov: None` passes NULL with `count` segments.
pub fn ep_post_recv(
    ep: Handle,
    iov: Option<&[Segment]>,
    count: i32,
    cookie: u64,
    flags: u32,
) -> u32 {
    let mut t = triplets(iov);
    if iov.is_some() && count >= 0 && count as usize > t.len() {
        return d::dat_error(d::DAT_INVALID_PARAMETER, d::DAT_INVALID_ARG2);
    }
    let p = if iov.is_some() {
        t.as_mut_ptr()
    } else {
        core::ptr::null_mut()
    };
    // SAFETY: see the module doc on handles; `p` is NULL or `count` triplets.
    unsafe {
        d::dat_ep_post_recv(
            ep.raw(),
            count,
            p,
            d::DAT_DTO_COOKIE { as_64: cookie },
            flags as _,
        )
    }
}

/// dat_ep_post_rdma_write of `iov` to `remote`.
pub fn ep_post_rdma_write(ep: Handle, iov: &[Segment], cookie: u64, remote: Remote) -> u32 {
    post_rdma(d::dat_ep_post_rdma_write, ep, iov, cookie, remote)
}

/// dat_ep_post_rdma_read of `remote` into `iov`.
pub fn ep_post_rdma_read(ep: Handle, iov: &[Segment], cookie: u64, remote: Remote) -> u32 {
    post_rdma(d::dat_ep_post_rdma_read, ep, iov, cookie, remote)
}

/// One RDMA WRITE (`write`) or READ of one segment with completion `flags`, without building
/// a triplet list on the heap (the bandwidth benchmark posts millions).
pub fn ep_post_rdma_one(
    ep: Handle,
    write: bool,
    seg: Segment,
    cookie: u64,
    remote: Remote,
    flags: u32,
) -> u32 {
    let mut t = [d::DAT_LMR_TRIPLET {
        lmr_context: seg.lmr_context,
        virtual_address: seg.addr,
        segment_length: seg.len,
    }];
    let r = d::DAT_RMR_TRIPLET {
        virtual_address: remote.addr,
        segment_length: remote.len,
        rmr_context: remote.rmr_context,
    };
    let post: PostRdma = if write {
        d::dat_ep_post_rdma_write
    } else {
        d::dat_ep_post_rdma_read
    };
    // SAFETY: see the module doc on handles; `t` holds one triplet, `r` is valid.
    unsafe {
        post(
            ep.raw(),
            1,
            t.as_mut_ptr(),
            d::DAT_DTO_COOKIE { as_64: cookie },
            &r,
            flags as _,
        )
    }
}

/// dat_ep_post_rdma_write (`write`) or _read with every argument as given: `count` segments
/// at `iov` (`None`: a NULL pointer), `remote` (`None`: NULL), completion `flags`.
pub fn ep_post_rdma_raw(
    ep: Handle,
    write: bool,
    count: i32,
    iov: Option<&[Segment]>,
    cookie: u64,
    remote: Option<Remote>,
    flags: u32,
) -> u32 {
    let mut t = triplets(iov);
    let t_ptr = if iov.is_some() {
        t.as_mut_ptr()
    } else {
        core::ptr::null_mut()
    };
    let r = remote.map(|remote| d::DAT_RMR_TRIPLET {
        virtual_address: remote.addr,
        segment_length: remote.len,
        rmr_context: remote.rmr_context,
    });
    let r_ptr = r
        .as_ref()
        .map_or(core::ptr::null(), |r| r as *const d::DAT_RMR_TRIPLET);
    let post: PostRdma = if write {
        d::dat_ep_post_rdma_write
    } else {
        d::dat_ep_post_rdma_read
    };
    // SAFETY: see the module doc on handles; the pointers are valid or NULL (the provider
    // checks `count` against the IOV before reading it).
    unsafe {
        post(
            ep.raw(),
            count,
            t_ptr,
            d::DAT_DTO_COOKIE { as_64: cookie },
            r_ptr,
            flags as _,
        )
    }
}

/// The C signature shared by dat_ep_post_rdma_write and dat_ep_post_rdma_read.
type PostRdma = unsafe extern "C" fn(
    d::DAT_EP_HANDLE,
    d::DAT_COUNT,
    *mut d::DAT_LMR_TRIPLET,
    d::DAT_DTO_COOKIE,
    *const d::DAT_RMR_TRIPLET,
    d::DAT_COMPLETION_FLAGS,
) -> d::DAT_RETURN;

/// One RDMA post (`post` is dat_ep_post_rdma_write or _read) of `iov` against `remote`.
fn post_rdma(post: PostRdma, ep: Handle, iov: &[Segment], cookie: u64, remote: Remote) -> u32 {
    let mut t = triplets(Some(iov));
    let r = d::DAT_RMR_TRIPLET {
        virtual_address: remote.addr,
        segment_length: remote.len,
        rmr_context: remote.rmr_context,
    };
    // SAFETY: see the module doc on handles; `t` holds `iov.len()` triplets, `r` is valid.
    unsafe {
        post(
            ep.raw(),
            t.len() as i32,
            t.as_mut_ptr(),
            d::DAT_DTO_COOKIE { as_64: cookie },
            &r,
            d::DAT_COMPLETION_DEFAULT_FLAG as _,
        )
    }
}

/// dat_psp_create (DAT_PSP_CONSUMER_FLAG) on `conn_qual`, CRs to `evd`.
pub fn psp_create(ia: Handle, conn_qual: u64, evd: Handle, psp: Option<&mut Handle>) -> u32 {
    let mut h: d::DAT_PSP_HANDLE = core::ptr::null_mut();
    let p = out_ptr(psp.is_some(), &mut h);
    // SAFETY: see the module doc on handles; `p` valid or NULL.
    let rc =
        unsafe { d::dat_psp_create(ia.raw(), conn_qual, evd.raw(), d::DAT_PSP_CONSUMER_FLAG, p) };
    if let Some(o) = psp {
        *o = Handle::from_raw(h);
    }
    rc
}

/// dat_psp_free.
pub fn psp_free(psp: Handle) -> u32 {
    // SAFETY: see the module doc on handles.
    unsafe { d::dat_psp_free(psp.raw()) }
}

/// dat_rsp_create: `ep` reserved for `conn_qual`, its request to `evd`.
pub fn rsp_create(
    ia: Handle,
    conn_qual: u64,
    ep: Handle,
    evd: Handle,
    rsp: Option<&mut Handle>,
) -> u32 {
    let mut h: d::DAT_RSP_HANDLE = core::ptr::null_mut();
    let p = out_ptr(rsp.is_some(), &mut h);
    // SAFETY: see the module doc on handles; `p` valid or NULL.
    let rc = unsafe { d::dat_rsp_create(ia.raw(), conn_qual, ep.raw(), evd.raw(), p) };
    if let Some(o) = rsp {
        *o = Handle::from_raw(h);
    }
    rc
}

/// dat_rsp_free.
pub fn rsp_free(rsp: Handle) -> u32 {
    // SAFETY: see the module doc on handles.
    unsafe { d::dat_rsp_free(rsp.raw()) }
}

/// dat_rmr_create on `pz`.
pub fn rmr_create(pz: Handle, rmr: Option<&mut Handle>) -> u32 {
    let mut h: d::DAT_RMR_HANDLE = core::ptr::null_mut();
    let p = out_ptr(rmr.is_some(), &mut h);
    // SAFETY: see the module doc on handles; `p` valid or NULL.
    let rc = unsafe { d::dat_rmr_create(pz.raw(), p) };
    if let Some(o) = rmr {
        *o = Handle::from_raw(h);
    }
    rc
}

/// dat_rmr_free.
pub fn rmr_free(rmr: Handle) -> u32 {
    // SAFETY: see the module doc on handles.
    unsafe { d::dat_rmr_free(rmr.raw()) }
}

/// dat_evd_enable (`true`) or dat_evd_disable.
pub fn evd_set_enabled(evd: Handle, enabled: bool) -> u32 {
    // SAFETY: see the module doc on handles.
    unsafe {
        if enabled {
            d::dat_evd_enable(evd.raw())
        } else {
            d::dat_evd_disable(evd.raw())
        }
    }
}

/// dat_cr_accept with `pdata`.
pub fn cr_accept(cr: Handle, ep: Handle, pdata: &[u8]) -> u32 {
    // SAFETY: see the module doc on handles; `pdata` readable.
    unsafe {
        d::dat_cr_accept(
            cr.raw(),
            ep.raw(),
            pdata.len() as i32,
            pdata.as_ptr() as *mut c_void,
        )
    }
}

/// dat_cr_reject.
pub fn cr_reject(cr: Handle) -> u32 {
    // SAFETY: see the module doc on handles.
    unsafe { d::dat_cr_reject(cr.raw(), 0, core::ptr::null_mut()) }
}
