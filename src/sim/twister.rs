//! CPython's Mersenne Twister: MT19937 as `Modules/_randommodule.c` has it, with the draws
//! `random.Random` builds on it, so a stream seeded from a `random.Random`'s state draws what
//! that object would draw, value for value.
//!
//! * [`Twister::below`] is `_randbelow_with_getrandbits(n)`, what `randint(a, b)` draws for
//!   `a + below(b - a + 1)` and `randrange(n)` for `below(n)`;
//! * [`Twister::uniform`] is `random()`: 53 random bits as a float in `[0, 1)`;
//! * [`Twister::from_state`] takes the words of `random.Random.getstate()[1]`;
//! * [`Twister::from_int_seed`] is `random.Random(n)` for an integer seed (`init_by_array`
//!   over the seed's 32-bit words), for tests and for Rust users without a Python state.

use crate::error::ArgumentError;

/// Words of state.
pub const N: usize = 624;
const M: usize = 397;

/// MT19937 with the draws of `random.Random`. Cloning a twister forks its stream.
#[derive(Clone)]
pub struct Twister {
    state: [u32; N],
    index: usize,
}

impl std::fmt::Debug for Twister {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Twister(index={})", self.index)
    }
}

impl Twister {
    /// From the second item of `random.Random.getstate()` (version 3): 624 words of state,
    /// each below 2**32, then the index (at most 624).
    pub fn from_state(words: &[u64]) -> Result<Self, ArgumentError> {
        if words.len() != N + 1 || words[..N].iter().any(|w| *w > u64::from(u32::MAX)) || words[N] > N as u64 {
            return Err(ArgumentError::InvalidText {
                argument: "rng",
                value: format!("{} words", words.len()),
                reason: "not the state of a random.Random (Mersenne Twister, version 3)".to_owned(),
            });
        }
        let mut out = Twister { state: [0; N], index: words[N] as usize };
        for (slot, w) in out.state.iter_mut().zip(words) {
            *slot = *w as u32;
        }
        Ok(out)
    }

    /// `random.Random(seed)` for an integer seed: `init_by_array` over the 32-bit words of
    /// `seed`, least significant first (`[0]` for 0).
    pub fn from_int_seed(seed: u128) -> Self {
        let mut key = Vec::new();
        let mut rest = seed;
        while rest > 0 {
            key.push(rest as u32);
            rest >>= 32;
        }
        if key.is_empty() {
            key.push(0);
        }
        Self::from_key(&key)
    }

    /// `init_genrand(s)`.
    fn from_word(s: u32) -> Self {
        let mut state = [0u32; N];
        state[0] = s;
        for i in 1..N {
            state[i] = 1_812_433_253u32.wrapping_mul(state[i - 1] ^ (state[i - 1] >> 30)).wrapping_add(i as u32);
        }
        Twister { state, index: N }
    }

    /// `init_by_array(key)`, `key` not empty.
    fn from_key(key: &[u32]) -> Self {
        let mut t = Self::from_word(19_650_218);
        let mt = &mut t.state;
        let (mut i, mut j) = (1usize, 0usize);
        for _ in 0..N.max(key.len()) {
            let prev = mt[i - 1] ^ (mt[i - 1] >> 30);
            mt[i] = (mt[i] ^ prev.wrapping_mul(1_664_525)).wrapping_add(key[j]).wrapping_add(j as u32);
            i += 1;
            j += 1;
            if i >= N {
                mt[0] = mt[N - 1];
                i = 1;
            }
            if j >= key.len() {
                j = 0;
            }
        }
        for _ in 0..N - 1 {
            let prev = mt[i - 1] ^ (mt[i - 1] >> 30);
            mt[i] = (mt[i] ^ prev.wrapping_mul(1_566_083_941)).wrapping_sub(i as u32);
            i += 1;
            if i >= N {
                mt[0] = mt[N - 1];
                i = 1;
            }
        }
        mt[0] = 0x8000_0000;
        t
    }

    /// The state as `random.Random.getstate()[1]` has it: 624 words, then the index.
    pub fn state(&self) -> Vec<u64> {
        self.state.iter().map(|w| u64::from(*w)).chain([self.index as u64]).collect()
    }

    /// `genrand_uint32()`: the next 32-bit output.
    pub fn next_u32(&mut self) -> u32 {
        const UPPER: u32 = 0x8000_0000;
        const LOWER: u32 = 0x7fff_ffff;
        const MATRIX_A: u32 = 0x9908_b0df;
        if self.index >= N {
            for k in 0..N {
                let y = (self.state[k] & UPPER) | (self.state[(k + 1) % N] & LOWER);
                let mag = if y & 1 == 1 { MATRIX_A } else { 0 };
                self.state[k] = self.state[(k + M) % N] ^ (y >> 1) ^ mag;
            }
            self.index = 0;
        }
        let mut y = self.state[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// `getrandbits(k)` for `1 <= k <= 64`: 32-bit words, least significant first, the last
    /// one shifted down to the bits that remain.
    pub fn bits(&mut self, k: u32) -> u64 {
        debug_assert!((1..=64).contains(&k));
        if k <= 32 {
            return u64::from(self.next_u32() >> (32 - k));
        }
        let low = u64::from(self.next_u32());
        let high = u64::from(self.next_u32() >> (64 - k));
        low | (high << 32)
    }

    /// `_randbelow_with_getrandbits(n)` for `n >= 1`: `getrandbits(n.bit_length())` until the
    /// draw is below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n >= 1);
        let k = 64 - n.leading_zeros();
        loop {
            let r = self.bits(k);
            if r < n {
                return r;
            }
        }
    }

    /// `random()`: 53 random bits as a float in `[0, 1)`.
    pub fn uniform(&mut self) -> f64 {
        let a = f64::from(self.next_u32() >> 5);
        let b = f64::from(self.next_u32() >> 6);
        (a * 67_108_864.0 + b) * (1.0 / 9_007_199_254_740_992.0)
    }
}

#[cfg(test)]
mod tests {
    //! Expected values are CPython's: `random.Random(seed)` and its draws, printed once and
    //! written down here.
    use super::*;

    fn randint(t: &mut Twister, a: i64, b: i64) -> i64 {
        a + t.below((b - a + 1) as u64) as i64
    }

    #[test]
    fn integer_seeds_give_cpythons_state() {
        // random.Random(seed).getstate()[1]: words 0..4, word 623, the index
        let cases: [(u128, [u64; 4], u64); 4] = [
            (0, [2147483648, 766982754, 497961170, 3952298588], 2902720905),
            (42, [2147483648, 3564348608, 1266698288, 4212342371], 3831079317),
            ((1 << 40) + 5, [2147483648, 550267540, 1323789645, 1442223101], 2187275131),
            (19650218, [2147483648, 677824540, 2068261855, 105504973], 198100469),
        ];
        for (seed, head, last) in cases {
            let state = Twister::from_int_seed(seed).state();
            assert_eq!(state.len(), N + 1);
            assert_eq!(state[..4], head, "seed {seed}");
            assert_eq!(state[N - 1], last, "seed {seed}");
            assert_eq!(state[N], N as u64, "seed {seed}");
        }
    }

    #[test]
    fn draws_as_random_random() {
        let mut t = Twister::from_int_seed(42);
        let ints: Vec<i64> = (0..12).map(|_| randint(&mut t, 0, 9)).collect();
        assert_eq!(ints, [1, 0, 4, 3, 3, 2, 1, 8, 1, 9, 6, 0]);
        let floats: Vec<f64> = (0..4).map(|_| t.uniform()).collect();
        assert_eq!(floats, [0.029797219438070344, 0.21863797480360336, 0.5053552881033624, 0.026535969683863625]);
        let ints: Vec<i64> = (0..6).map(|_| randint(&mut t, 5, 250)).collect();
        assert_eq!(ints, [55, 188, 171, 184, 144, 112]);
        // randrange(2**40 + 3): two words per draw, the high one shifted
        let wide: Vec<u64> = (0..4).map(|_| t.below((1 << 40) + 3)).collect();
        assert_eq!(wide, [984494296032, 612416232876, 351353318333, 930711421818]);
        // randrange(2**64 - 1): all 64 bits
        let widest: Vec<u64> = (0..3).map(|_| t.below(u64::MAX)).collect();
        assert_eq!(widest, [5125821543982213238, 3971837850219807024, 14083980817542670947]);
        // randint(0, 0) still draws (one bit until it is 0)
        assert_eq!((randint(&mut t, 0, 0), randint(&mut t, 0, 0)), (0, 0));
    }

    #[test]
    fn regenerates_the_state_after_624_words() {
        // random.Random(7): randint(1, 1000) draws 0, 623, 624 and 699 (past one regeneration)
        let mut t = Twister::from_int_seed(7);
        let x: Vec<i64> = (0..700).map(|_| randint(&mut t, 1, 1000)).collect();
        assert_eq!((x[0], x[623], x[624], x[699]), (332, 347, 568, 428));
    }

    #[test]
    fn a_state_round_trips_and_continues_the_stream() {
        let mut a = Twister::from_int_seed(42);
        for _ in 0..100 {
            a.uniform();
        }
        let mut b = Twister::from_state(&a.state()).unwrap();
        for _ in 0..1000 {
            assert_eq!(a.next_u32(), b.next_u32());
        }
    }

    #[test]
    fn refuses_what_is_no_state() {
        let good = Twister::from_int_seed(1).state();
        assert!(Twister::from_state(&good[..N]).is_err());
        let mut big = good.clone();
        big[3] = 1 << 32;
        assert!(Twister::from_state(&big).is_err());
        let mut index = good;
        index[N] = N as u64 + 1;
        let err = Twister::from_state(&index).unwrap_err();
        assert!(err.to_string().contains("not the state of a random.Random"), "{err}");
    }
}
