//! Secrets a peer must not guess. An off-path attacker who can predict a QP number, a starting
//! PSN, an R_Key or a CM communication ID can inject into, read from or tear down a connection
//! (ReDMArk, USENIX Security 2021), so those come from generators seeded here, from the OS
//! random source (getrandom(2)), never from the clock or the process ID.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// 64 bits from the OS random source.
pub fn os_u64() -> Result<u64, getrandom::Error> {
    let mut b = [0u8; 8];
    getrandom::getrandom(&mut b)?;
    Ok(u64::from_ne_bytes(b))
}

/// A generator seeded from the OS random source.
pub fn os_rng() -> Result<ChaCha8Rng, getrandom::Error> {
    let mut seed = [0u8; 32];
    getrandom::getrandom(&mut seed)?;
    Ok(ChaCha8Rng::from_seed(seed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::RngCore;

    #[test]
    fn two_draws_differ() {
        // 2^-64 to fail by chance.
        assert_ne!(os_u64().unwrap(), os_u64().unwrap());
        assert_ne!(os_rng().unwrap().next_u64(), os_rng().unwrap().next_u64());
    }
}
