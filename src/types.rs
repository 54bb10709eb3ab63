//! Kafka's meaningful integers, each with its own type and domain.
//!
//! Kafka stores these as signed Java integers and uses `-1` for "undefined"; epochlab keeps the
//! value domain Kafka allows (non-negative, within the Java field width) and expresses absence
//! with `Option`. Constructors from wide integers (`try_new`) check the domain and name the
//! argument, so a caller's mistake becomes an [`ArgumentError`], never a wrapped number.

use crate::error::ArgumentError;

macro_rules! domain_type {
    ($(#[$doc:meta])* $name:ident, $repr:ty, $max:expr, $domain:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub $repr);

        impl $name {
            /// Largest value Kafka's wire format allows.
            pub const MAX: $repr = $max;

            /// Checks `value` against the domain `[0, MAX]`; `argument` names it in the error.
            pub fn try_new(value: i128, argument: &'static str) -> Result<Self, ArgumentError> {
                if value < 0 || value > Self::MAX as i128 {
                    return Err(ArgumentError::OutOfDomain { argument, value, domain: $domain });
                }
                Ok(Self(value as $repr))
            }

            /// The raw value.
            pub fn get(self) -> $repr {
                self.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

domain_type!(
    /// A position in a partition log (0-based). Log end offsets and high watermarks are
    /// exclusive bounds of this type.
    Offset, u64, i64::MAX as u64, "0..=2^63-1"
);
domain_type!(
    /// A partition leader epoch (Kafka `int32`, non-negative).
    LeaderEpoch, u32, i32::MAX as u32, "0..=2^31-1"
);
domain_type!(
    /// A producer id assigned by InitProducerId (Kafka `int64`, non-negative).
    ProducerId, u64, i64::MAX as u64, "0..=2^63-1"
);
domain_type!(
    /// A producer epoch, bumped on every InitProducerId for a transactional id (Kafka `int16`).
    ProducerEpoch, u16, i16::MAX as u16, "0..=32767"
);
domain_type!(
    /// A producer sequence number (Kafka `int32`), wrapping from `MAX` to 0.
    Sequence, u32, i32::MAX as u32, "0..=2^31-1"
);

domain_type!(
    /// A broker id (Kafka `int32`, non-negative).
    BrokerId, u32, i32::MAX as u32, "0..=2^31-1"
);

impl Offset {
    /// `self + n`, or `None` past the domain.
    pub fn checked_add(self, n: u64) -> Option<Offset> {
        self.0.checked_add(n).filter(|v| *v <= Self::MAX).map(Offset)
    }
}

impl Sequence {
    /// `self + increment` wrapping past `MAX` to 0, as Kafka's
    /// `DefaultRecordBatch.incrementSequence` does.
    pub fn increment(self, increment: u32) -> Sequence {
        let max = Self::MAX;
        if self.0 > max - increment.min(max) {
            Sequence(increment - (max - self.0) - 1)
        } else {
            Sequence(self.0 + increment)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_reject_negative_and_too_wide_values() {
        assert!(Offset::try_new(-1, "offset").is_err());
        assert!(Offset::try_new(i64::MAX as i128, "offset").is_ok());
        assert!(Offset::try_new(i64::MAX as i128 + 1, "offset").is_err());
        assert!(ProducerEpoch::try_new(32768, "producer_epoch").is_err());
        assert!(LeaderEpoch::try_new(1 << 31, "epoch").is_err());
    }

    #[test]
    fn sequence_wraps_like_kafka() {
        assert_eq!(Sequence(5).increment(3), Sequence(8));
        assert_eq!(Sequence(Sequence::MAX).increment(1), Sequence(0));
        assert_eq!(Sequence(Sequence::MAX - 1).increment(3), Sequence(1));
        assert_eq!(Sequence(Sequence::MAX).increment(0), Sequence(Sequence::MAX));
    }
}
