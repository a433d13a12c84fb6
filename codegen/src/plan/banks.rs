//! Shared-memory banks: the conflict degree of a warp's accesses, which the plans' unit tests
//! and `explain` report.

use gemm_dsl::geometry::COPY_VECTOR_BYTES;

/// Shared-memory banks and the width of one bank.
pub const BANKS: u32 = 32;
pub const BANK_BYTES: u32 = 4;

/// The bank of a shared-memory byte address: `(addr >> 2) & 31`.
pub const fn bank(address: u32) -> u32 {
    (address / BANK_BYTES) % BANKS
}

/// The conflict degree of one warp-wide shared-memory access: 1 means every bank is touched by
/// at most one distinct word in each phase (broadcasts are free).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BankReport {
    pub access: &'static str,
    pub degree: u32,
}

/// Conflict degree of 16-byte accesses at the given per-lane byte addresses: the worst phase
/// of 8 lanes (one 128-byte wavefront; for `ldmatrix`, one 8x8 matrix), each bank counting its
/// distinct words (bank = (addr >> 2) & 31).
pub fn conflict_degree(addresses: &[u32]) -> u32 {
    conflict_degree_for(addresses, COPY_VECTOR_BYTES)
}

/// Conflict degree of `access_bytes`-wide accesses (4, 8 or 16): the hardware serves
/// `128 / access_bytes` lanes per phase; the worst phase counts, each bank counting its
/// distinct words.
pub fn conflict_degree_for(addresses: &[u32], access_bytes: u32) -> u32 {
    let lanes_per_phase = (128 / access_bytes.max(BANK_BYTES)) as usize;
    let words_per_access = (access_bytes / BANK_BYTES).max(1);
    addresses
        .chunks(lanes_per_phase)
        .map(|phase| {
            let mut words_per_bank = vec![Vec::<u32>::new(); BANKS as usize];
            for &address in phase {
                for word in 0..words_per_access {
                    let word_address = address / BANK_BYTES + word;
                    let bank = &mut words_per_bank[(word_address % BANKS) as usize];
                    if !bank.contains(&word_address) {
                        bank.push(word_address);
                    }
                }
            }
            words_per_bank
                .iter()
                .map(|words| words.len() as u32)
                .max()
                .unwrap_or(0)
        })
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflict_degree_of_narrow_accesses() {
        // 32 lanes reading consecutive words: one phase, conflict-free.
        let words: Vec<u32> = (0..32).map(|i| i * 4).collect();
        assert_eq!(conflict_degree_for(&words, 4), 1);
        // Four rows of 512 bytes, 8 words each: four words per bank.
        let rows: Vec<u32> = (0..32).map(|i| (i % 4) * 512 + (i / 4) * 4).collect();
        assert_eq!(conflict_degree_for(&rows, 4), 4);
        assert_eq!(bank(132), 1);
    }
}
