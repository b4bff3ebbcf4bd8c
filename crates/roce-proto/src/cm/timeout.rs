//! CM timeout encoding (IBTA vol. 1 §12.7.16, §12.7.34): a 5-bit exponent t meaning
//! 4.096 us * 2^t, used by the CM response timeouts, the MRA service timeout and the local ACK
//! timeout.

use core::time::Duration;

/// 4.096 us * 2^t for a 5-bit `t` (larger values are clamped to 31).
pub fn cm_timeout(t: u8) -> Duration {
    Duration::from_nanos(4096u64 << t.min(31))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values() {
        assert_eq!(cm_timeout(0), Duration::from_nanos(4096));
        // 20 (what Linux rdma_cm uses) is about 4.3 s.
        assert_eq!(cm_timeout(20), Duration::from_nanos(4_294_967_296));
        assert_eq!(cm_timeout(40), cm_timeout(31));
    }
}
