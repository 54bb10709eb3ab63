//! Every Kafka on-disk format parser of `epochlab::formats` on the fuzzer's bytes. A crash is
//! a panic, an abort (allocation failure) or a timeout; a segment's error must also sit at
//! the end of its valid bytes.
#![no_main]

use epochlab::error::FormatError;
use epochlab::formats;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dump = formats::parse_segment(data, "fuzz.log");
    assert!(dump.valid_bytes <= dump.size);
    if let Some(FormatError::Malformed { offset, .. }) = &dump.error {
        assert_eq!(*offset, dump.valid_bytes);
    }
    let _ = formats::parse_leader_epoch_checkpoint(data, "leader-epoch-checkpoint");
    let _ = formats::parse_offset_checkpoint(data, "replication-offset-checkpoint");
    let _ = formats::parse_partition_metadata(data, "partition.metadata");
    let _ = formats::parse_producer_snapshot(data, "0.snapshot");
    let _ = formats::parse_offset_index(data, "0.index");
    let _ = formats::parse_time_index(data, "0.timeindex");
    let _ = formats::parse_txn_index(data, "0.txnindex");
});
