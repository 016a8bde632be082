//! Exactly-once bookkeeping: which (producer, sequence) entries a consumer saw.
//!
//! Each consumer thread keeps its own [`Seen`] (no sharing while running); the
//! report ORs them together: `lost = sent − unique`, `dup = received − unique`.

/// One growable bitmap per producer, plus how many entries were recorded.
#[derive(Debug, Default, Clone)]
pub struct Seen {
    bits: Vec<Vec<u64>>,
    /// Entries recorded, duplicates included.
    pub received: u64,
}

impl Seen {
    /// Mark entry `seq` of producer `producer`; returns false if it was already marked.
    pub fn record(&mut self, producer: usize, seq: u64) -> bool {
        self.received += 1;
        if self.bits.len() <= producer {
            self.bits.resize(producer + 1, Vec::new());
        }
        let words = &mut self.bits[producer];
        let word = (seq / 64) as usize;
        if words.len() <= word {
            words.resize((word + 1).next_power_of_two(), 0);
        }
        let mask = 1u64 << (seq % 64);
        let fresh = words[word] & mask == 0;
        words[word] |= mask;
        fresh
    }

    /// OR `other` into `self` and add its received count.
    pub fn merge(&mut self, other: &Seen) {
        self.received += other.received;
        if self.bits.len() < other.bits.len() {
            self.bits.resize(other.bits.len(), Vec::new());
        }
        for (mine, theirs) in self.bits.iter_mut().zip(&other.bits) {
            if mine.len() < theirs.len() {
                mine.resize(theirs.len(), 0);
            }
            for (a, b) in mine.iter_mut().zip(theirs) {
                *a |= *b;
            }
        }
    }

    /// Distinct entries marked.
    pub fn unique(&self) -> u64 {
        self.bits
            .iter()
            .flatten()
            .map(|w| u64::from(w.count_ones()))
            .sum()
    }

    /// Distinct entries of `producer` with sequence `< sent`: how many of the
    /// entries it sent arrived (anything at or past `sent` was never sent).
    pub fn unique_below(&self, producer: usize, sent: u64) -> u64 {
        let Some(words) = self.bits.get(producer) else {
            return 0;
        };
        let full = (sent / 64) as usize;
        let mut n: u64 = words
            .iter()
            .take(full)
            .map(|w| u64::from(w.count_ones()))
            .sum();
        if !sent.is_multiple_of(64) {
            if let Some(w) = words.get(full) {
                n += u64::from((w & ((1u64 << (sent % 64)) - 1)).count_ones());
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_and_merge() {
        let mut a = Seen::default();
        assert!(a.record(0, 0));
        assert!(a.record(0, 200));
        assert!(!a.record(0, 200));
        let mut b = Seen::default();
        assert!(b.record(0, 0)); // seen by another consumer too: a duplicate overall
        assert!(b.record(3, 5));
        a.merge(&b);
        assert_eq!(a.received, 5);
        assert_eq!(a.unique(), 3);
        assert_eq!(a.unique_below(0, 200), 1);
        assert_eq!(a.unique_below(0, 201), 2);
        assert_eq!(a.unique_below(3, 64), 1);
        assert_eq!(a.unique_below(1, 64), 0);
    }
}
