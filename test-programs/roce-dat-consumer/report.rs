//! DAT return codes, events, statuses and states by name, and the `CASE` lines.

use super::*;

/// A DAT_RETURN's name: `DAT_SUCCESS` or `MAJOR/SUBTYPE` (dat_strerror).
pub(crate) fn code_name(code: u32) -> String {
    if code == d::DAT_SUCCESS {
        return "DAT_SUCCESS".into();
    }
    let (major, minor) = strerror(code);
    if minor.is_empty() || minor == "DAT_NO_SUBTYPE" {
        format!("{major}({code:#x})")
    } else {
        format!("{major}/{minor}({code:#x})")
    }
}

pub(crate) fn event_name(n: u32) -> String {
    let names = [
        (d::DAT_CONNECTION_EVENT_ESTABLISHED, "ESTABLISHED"),
        (d::DAT_CONNECTION_EVENT_PEER_REJECTED, "PEER_REJECTED"),
        (
            d::DAT_CONNECTION_EVENT_NON_PEER_REJECTED,
            "NON_PEER_REJECTED",
        ),
        (
            d::DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR,
            "ACCEPT_COMPLETION_ERROR",
        ),
        (d::DAT_CONNECTION_EVENT_DISCONNECTED, "DISCONNECTED"),
        (d::DAT_CONNECTION_EVENT_BROKEN, "BROKEN"),
        (d::DAT_CONNECTION_EVENT_TIMED_OUT, "TIMED_OUT"),
        (d::DAT_CONNECTION_EVENT_UNREACHABLE, "UNREACHABLE"),
    ];
    names
        .iter()
        .find(|(v, _)| *v == n)
        .map(|(_, s)| format!("DAT_CONNECTION_EVENT_{s}"))
        .unwrap_or_else(|| format!("event({n:#x})"))
}

pub(crate) fn status_name(s: u32) -> String {
    let names = [
        (d::DAT_DTO_SUCCESS, "DAT_DTO_SUCCESS"),
        (d::DAT_DTO_ERR_FLUSHED, "DAT_DTO_ERR_FLUSHED"),
        (d::DAT_DTO_ERR_LOCAL_LENGTH, "DAT_DTO_ERR_LOCAL_LENGTH"),
        (d::DAT_DTO_ERR_LOCAL_EP, "DAT_DTO_ERR_LOCAL_EP"),
        (
            d::DAT_DTO_ERR_LOCAL_PROTECTION,
            "DAT_DTO_ERR_LOCAL_PROTECTION",
        ),
        (d::DAT_DTO_ERR_BAD_RESPONSE, "DAT_DTO_ERR_BAD_RESPONSE"),
        (d::DAT_DTO_ERR_REMOTE_ACCESS, "DAT_DTO_ERR_REMOTE_ACCESS"),
        (
            d::DAT_DTO_ERR_REMOTE_RESPONDER,
            "DAT_DTO_ERR_REMOTE_RESPONDER",
        ),
        (d::DAT_DTO_ERR_TRANSPORT, "DAT_DTO_ERR_TRANSPORT"),
        (
            d::DAT_DTO_ERR_RECEIVER_NOT_READY,
            "DAT_DTO_ERR_RECEIVER_NOT_READY",
        ),
    ];
    names
        .iter()
        .find(|(v, _)| *v == s)
        .map(|(_, n)| n.to_string())
        .unwrap_or_else(|| format!("status({s})"))
}

pub(crate) fn state_name(s: u32) -> String {
    let names = [
        (d::DAT_EP_STATE_UNCONNECTED, "UNCONNECTED"),
        (
            d::DAT_EP_STATE_ACTIVE_CONNECTION_PENDING,
            "ACTIVE_CONNECTION_PENDING",
        ),
        (d::DAT_EP_STATE_CONNECTED, "CONNECTED"),
        (d::DAT_EP_STATE_DISCONNECT_PENDING, "DISCONNECT_PENDING"),
        (d::DAT_EP_STATE_DISCONNECTED, "DISCONNECTED"),
        (d::DAT_EP_STATE_COMPLETION_PENDING, "COMPLETION_PENDING"),
    ];
    names
        .iter()
        .find(|(v, _)| *v == s)
        .map(|(_, n)| format!("DAT_EP_STATE_{n}"))
        .unwrap_or_else(|| format!("state({s})"))
}

#[derive(Default)]
pub(crate) struct Report {
    pub(crate) failed: u32,
}

impl Report {
    pub(crate) fn line(&mut self, case: &str, expected: &str, got: &str, pass: bool) {
        if !pass {
            self.failed += 1;
        }
        println!(
            "CASE {case} expected={expected} got={got} {}",
            if pass { "PASS" } else { "FAIL" }
        );
        let _ = std::io::stdout().flush();
    }

    /// A call's DAT_RETURN against the code the man page names.
    pub(crate) fn code(&mut self, case: &str, expected: u32, got: u32) {
        self.line(case, &code_name(expected), &code_name(got), expected == got);
    }

    pub(crate) fn event(&mut self, case: &str, expected: u32, got: Option<u32>) {
        let g = got.map_or("no event".to_string(), event_name);
        self.line(case, &event_name(expected), &g, got == Some(expected));
    }

    pub(crate) fn status(&mut self, case: &str, expected: u32, got: Option<u32>) {
        let g = got.map_or("no completion".to_string(), status_name);
        self.line(case, &status_name(expected), &g, got == Some(expected));
    }

    pub(crate) fn state(&mut self, case: &str, expected: u32, got: Result<u32, u32>) {
        let g = match got {
            Ok(s) => state_name(s),
            Err(e) => code_name(e),
        };
        self.line(case, &state_name(expected), &g, got == Ok(expected));
    }

    pub(crate) fn check(&mut self, case: &str, expected: &str, got: &str) {
        self.line(case, expected, got, expected == got);
    }
}

pub(crate) const fn err(ty: u32, sub: u32) -> u32 {
    d::dat_error(ty, sub)
}

pub(crate) const fn arg(n: u32) -> u32 {
    err(d::DAT_INVALID_PARAMETER, d::DAT_INVALID_ARG1 + n - 1)
}
