//! DPDK telemetry: commands a running process answers on the `dpdk_telemetry.v2` socket of its
//! EAL runtime directory (`/var/run/dpdk/<file prefix>/`), read with Debian's
//! `dpdk-telemetry.py -f <file prefix>` or `roce-tool stats`.
//!
//! [`register`] adds a command (`/roce/port`, ...) whose handler returns a [`Value`] tree; the one
//! `extern "C"` callback DPDK calls for every registered command finds the handler by the
//! command's name and converts its tree into `rte_tel_data`. DPDK runs the callback on a thread
//! of its own per connected client (`lib/telemetry/telemetry.c`, `client_handler`), so a handler
//! must be `Send + Sync`, must not block for long, and only reads counters. A panicking handler
//! answers `null`, as a handler returning `None` does (DPDK's convention for a bad parameter).
//!
//! What DPDK 22.11 can carry, and so what the conversion does:
//! * dictionary keys of letters, digits, `_` and `/` only, at most 127 bytes: other characters
//!   become `_`;
//! * at most 256 dictionary entries and 512 array entries: the rest are left out;
//! * strings of at most 127 bytes (longer ones are cut by DPDK);
//! * arrays of numbers or of strings, dictionaries nested in dictionaries; a whole answer of at
//!   most 16 KiB of JSON (DPDK leaves out what does not fit). Commands stay small.
//!
//! Commands cannot be unregistered in DPDK 22.11: registering a name again replaces its
//! handler here, and a handler must cope with whatever it reads having gone (an IA closed).

use std::collections::HashMap;
use std::ffi::{c_char, c_int, CStr, CString};
use std::sync::{Arc, Mutex, OnceLock};

use super::error::DpdkError;

/// A value of a telemetry answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    U64(u64),
    Str(String),
    /// An array of numbers.
    U64s(Vec<u64>),
    /// An array of strings.
    Strs(Vec<String>),
    Dict(Dict),
}

/// A dictionary: entries in the order they were added (DPDK keeps the order in its JSON).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Dict {
    entries: Vec<(String, Value)>,
}

impl Dict {
    pub fn new() -> Dict {
        Dict::default()
    }

    /// Adds `name: value`.
    pub fn push(&mut self, name: impl Into<String>, value: Value) -> &mut Dict {
        self.entries.push((name.into(), value));
        self
    }

    /// Adds a number.
    pub fn u64(&mut self, name: impl Into<String>, value: u64) -> &mut Dict {
        self.push(name, Value::U64(value))
    }

    /// Adds a string.
    pub fn str(&mut self, name: impl Into<String>, value: impl Into<String>) -> &mut Dict {
        self.push(name, Value::Str(value.into()))
    }

    /// Adds a nested dictionary.
    pub fn dict(&mut self, name: impl Into<String>, value: Dict) -> &mut Dict {
        self.push(name, Value::Dict(value))
    }

    /// The entries in order.
    pub fn entries(&self) -> &[(String, Value)] {
        &self.entries
    }

    /// The value of the first entry named `name`.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.entries.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// What answers a command: its parameter (the text after the first comma, if any) in, the
/// answer out (`None`: `null`, e.g. for a bad parameter).
pub type Handler = dyn Fn(Option<&str>) -> Option<Value> + Send + Sync;

/// Longest command name DPDK 22.11 accepts (`MAX_CMD_LEN` 56, NUL included).
pub const MAX_COMMAND_LEN: usize = 55;
/// Longest dictionary key and string value (`RTE_TEL_MAX_STRING_LEN`, NUL included).
pub const MAX_NAME_LEN: usize = dpdk_sys::RTE_TEL_MAX_STRING_LEN as usize - 1;
const MAX_DICT_ENTRIES: usize = dpdk_sys::RTE_TEL_MAX_DICT_ENTRIES as usize;
const MAX_ARRAY_ENTRIES: usize = dpdk_sys::RTE_TEL_MAX_ARRAY_ENTRIES as usize;

fn handlers() -> &'static Mutex<HashMap<String, Arc<Handler>>> {
    static HANDLERS: OnceLock<Mutex<HashMap<String, Arc<Handler>>>> = OnceLock::new();
    HANDLERS.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Registers `command` (`/` then letters, digits, `_` and `/`, at most [`MAX_COMMAND_LEN`]
/// bytes) with its one-line `help`; registering it again replaces the handler. The command is
/// answered once EAL's telemetry runs (`rte_eal_init` without `--no-telemetry`); it may be
/// registered before.
pub fn register(
    command: &str,
    help: &str,
    handler: impl Fn(Option<&str>) -> Option<Value> + Send + Sync + 'static,
) -> Result<(), DpdkError> {
    let valid = command.starts_with('/')
        && command.len() <= MAX_COMMAND_LEN
        && command
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'/');
    if !valid {
        return Err(DpdkError::InvalidArgument(format!(
            "telemetry command {command:?}"
        )));
    }
    let help = CString::new(help)
        .ok()
        .filter(|h| h.as_bytes().len() <= MAX_NAME_LEN)
        .ok_or_else(|| DpdkError::InvalidArgument(format!("telemetry help {help:?}")))?;
    let mut map = handlers().lock().unwrap_or_else(|p| p.into_inner());
    let fresh = !map.contains_key(command);
    map.insert(command.to_owned(), Arc::new(handler));
    if fresh {
        let cmd = CString::new(command).expect("checked: no NUL");
        // SAFETY: both strings are NUL-terminated and valid for the call (DPDK copies them);
        // `answer` is an `extern "C"` function of the `telemetry_cb` signature that lives for
        // the process. The map's lock is held, so no concurrent registration of this name.
        let ret = unsafe {
            dpdk_sys::rte_telemetry_register_cmd(cmd.as_ptr(), Some(answer), help.as_ptr())
        };
        if ret < 0 {
            map.remove(command);
            return super::error::check(|| format!("rte_telemetry_register_cmd({command})"), ret)
                .map(drop);
        }
    }
    Ok(())
}

/// The answer of a registered command, as the callback gives it to DPDK; for tests and for
/// callers in the same process.
pub fn call(command: &str, params: Option<&str>) -> Option<Value> {
    let handler = handlers()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(command)
        .cloned()?;
    handler(params)
}

/// The callback of every registered command (DPDK's `telemetry_cb`).
extern "C" fn answer(
    cmd: *const c_char,
    params: *const c_char,
    d: *mut dpdk_sys::rte_tel_data,
) -> c_int {
    let run = std::panic::catch_unwind(|| {
        if cmd.is_null() || d.is_null() {
            return -1;
        }
        // SAFETY: DPDK passes the command it matched, NUL-terminated, valid for the call.
        let command = unsafe { CStr::from_ptr(cmd) }.to_string_lossy();
        let params = if params.is_null() {
            None
        } else {
            // SAFETY: DPDK passes the rest of the request after the first comma,
            // NUL-terminated, valid for the call.
            Some(unsafe { CStr::from_ptr(params) }.to_string_lossy())
        };
        match call(&command, params.as_deref()) {
            Some(v) => {
                // SAFETY: `d` is the zeroed answer DPDK owns for this call; it is filled once.
                unsafe { fill(d, &v) };
                0
            }
            None => -1,
        }
    });
    run.unwrap_or(-1)
}

/// A C string of `s`: NULs become spaces, cut to [`MAX_NAME_LEN`] bytes on a character
/// boundary.
fn c_string(s: &str) -> CString {
    let mut end = s.len().min(MAX_NAME_LEN);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    CString::new(s[..end].replace('\0', " ")).expect("NULs replaced")
}

/// A dictionary key DPDK accepts (`valid_name`: letters, digits, `_`, `/`).
pub fn key(name: &str) -> String {
    let k: String = name
        .chars()
        .take(MAX_NAME_LEN)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '/' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if k.is_empty() {
        "_".to_owned()
    } else {
        k
    }
}

/// Fills the fresh `d` with `v`: a dictionary, an array or (a lone number or string) a string.
///
/// # Safety
/// `d` points to an `rte_tel_data` that is zeroed or freshly allocated, not yet started.
unsafe fn fill(d: *mut dpdk_sys::rte_tel_data, v: &Value) {
    match v {
        Value::Dict(dict) => {
            // SAFETY: `d` is valid (the caller's contract); starting a dict only sets its type.
            unsafe { dpdk_sys::rte_tel_data_start_dict(d) };
            // SAFETY: `d` is a started dictionary.
            unsafe { fill_dict(d, dict) };
        }
        Value::U64s(xs) => {
            // SAFETY: as above; an array of u64 values.
            unsafe { dpdk_sys::rte_tel_data_start_array(d, dpdk_sys::RTE_TEL_U64_VAL) };
            for &x in xs.iter().take(MAX_ARRAY_ENTRIES) {
                // SAFETY: `d` is a started u64 array with room (at most the maximum entries).
                unsafe { dpdk_sys::rte_tel_data_add_array_u64(d, x) };
            }
        }
        Value::Strs(xs) => {
            // SAFETY: as above; an array of strings.
            unsafe { dpdk_sys::rte_tel_data_start_array(d, dpdk_sys::RTE_TEL_STRING_VAL) };
            for x in xs.iter().take(MAX_ARRAY_ENTRIES) {
                let s = c_string(x);
                // SAFETY: `d` is a started string array with room; DPDK copies `s`.
                unsafe { dpdk_sys::rte_tel_data_add_array_string(d, s.as_ptr()) };
            }
        }
        Value::Str(s) => {
            let s = c_string(s);
            // SAFETY: `d` is valid; DPDK copies the NUL-terminated string.
            unsafe { dpdk_sys::rte_tel_data_string(d, s.as_ptr()) };
        }
        Value::U64(n) => {
            let s = c_string(&n.to_string());
            // SAFETY: as above.
            unsafe { dpdk_sys::rte_tel_data_string(d, s.as_ptr()) };
        }
    }
}

/// Adds the entries of `dict` to the started dictionary `d`; nested values go into containers
/// that DPDK frees once it has written them out (`keep` = 0).
///
/// # Safety
/// `d` points to a valid `rte_tel_data` started as a dictionary.
unsafe fn fill_dict(d: *mut dpdk_sys::rte_tel_data, dict: &Dict) {
    for (name, v) in dict.entries().iter().take(MAX_DICT_ENTRIES) {
        let name = c_string(&key(name));
        match v {
            Value::U64(n) => {
                // SAFETY: `d` is a started dictionary with room; DPDK copies the name.
                unsafe { dpdk_sys::rte_tel_data_add_dict_u64(d, name.as_ptr(), *n) };
            }
            Value::Str(s) => {
                let s = c_string(s);
                // SAFETY: as above; DPDK copies the value too.
                unsafe { dpdk_sys::rte_tel_data_add_dict_string(d, name.as_ptr(), s.as_ptr()) };
            }
            Value::U64s(_) | Value::Strs(_) | Value::Dict(_) => {
                // SAFETY: allocates an uninitialised container (NULL when out of memory).
                let c = unsafe { dpdk_sys::rte_tel_data_alloc() };
                if c.is_null() {
                    continue;
                }
                // SAFETY: `c` is freshly allocated and filled once, as an array or dictionary.
                unsafe { fill(c, v) };
                // SAFETY: `d` is a started dictionary, `c` a started array or dictionary; with
                // keep = 0 DPDK frees `c` after writing the answer.
                let ret =
                    unsafe { dpdk_sys::rte_tel_data_add_dict_container(d, name.as_ptr(), c, 0) };
                if ret < 0 {
                    // Not added (no room): still ours.
                    // SAFETY: `c` came from rte_tel_data_alloc and nothing refers to it.
                    unsafe { dpdk_sys::rte_tel_data_free(c) };
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_keep_what_dpdk_accepts_and_replace_the_rest() {
        assert_eq!(key("net_af_packet0"), "net_af_packet0");
        assert_eq!(key("0000:03:00.0"), "0000_03_00_0");
        assert_eq!(key("a-b c/d"), "a_b_c/d");
        assert_eq!(key(""), "_");
        assert_eq!(key(&"x".repeat(300)).len(), MAX_NAME_LEN);
    }

    #[test]
    fn strings_lose_nuls_and_are_cut_on_a_character_boundary() {
        assert_eq!(c_string("a\0b").as_bytes(), b"a b");
        let long = "é".repeat(100); // 200 bytes
        let c = c_string(&long);
        assert!(c.as_bytes().len() <= MAX_NAME_LEN);
        assert!(std::str::from_utf8(c.as_bytes()).is_ok());
    }

    #[test]
    fn bad_command_names_are_refused_before_dpdk_sees_them() {
        for bad in [
            "roce",
            "/roce port",
            "/roce-port",
            &format!("/{}", "x".repeat(60)),
        ] {
            assert!(register(bad, "h", |_| None).is_err(), "{bad:?}");
        }
    }
}
