//! SplitMix64: a tiny deterministic PRNG, so a soak run is replayed from its seed.

pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// A random element of a non-empty slice.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    /// An index drawn with the given weights (not all zero).
    pub fn weighted(&mut self, weights: &[u64]) -> usize {
        let mut draw = self.below(weights.iter().sum());
        for (index, weight) in weights.iter().enumerate() {
            if draw < *weight {
                return index;
            }
            draw -= weight;
        }
        unreachable!("the draw is below the sum of the weights")
    }

    /// Uniform in `[low, high)` milliseconds.
    pub fn millis(&mut self, low: u64, high: u64) -> std::time::Duration {
        std::time::Duration::from_millis(low + self.below(high - low))
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn the_same_seed_gives_the_same_sequence() {
        let (mut a, mut b) = (Rng::new(42), Rng::new(42));
        let first: Vec<u64> = (0..5).map(|_| a.next_u64()).collect();
        let second: Vec<u64> = (0..5).map(|_| b.next_u64()).collect();
        assert_eq!(first, second);
        assert_ne!(
            first,
            (0..5).map(|_| Rng::new(43).next_u64()).collect::<Vec<_>>()
        );
    }

    #[test]
    fn weighted_draws_never_pick_a_zero_weight() {
        let mut rng = Rng::new(7);
        for _ in 0..1000 {
            assert_ne!(rng.weighted(&[3, 0, 1]), 1);
        }
    }
}
