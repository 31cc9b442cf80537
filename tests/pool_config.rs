//! `ACLALLOC_ALLOC_CONF` parsing and `roundup_power2_divisions` rounding,
//! through the public `PoolConfig` and `RoundupDivisions`.

use aclalloc::pool::roundup::{self, RoundupDivisions};
use aclalloc::pool::{Limit, PoolConfig};
use aclalloc::Error;

const MIB: usize = 1 << 20;
const ROUNDUP_INTERVALS: usize = 16;

#[test]
fn parses_every_documented_key() {
    let c = PoolConfig::default()
        .with_conf(" max_split_size_mb:128, garbage_collection_threshold:0.8 ,memory_fraction:0.5")
        .unwrap();
    assert_eq!(c.max_split_size, 128 * MIB);
    assert_eq!(c.garbage_collection_threshold, 0.8);
    assert_eq!(c.limit, Limit::Fraction(0.5));
    assert_eq!(c.limit.bytes(1000), 500);
    let c = PoolConfig::default()
        .with_conf("memory_limit_mb:64")
        .unwrap();
    assert_eq!(c.limit.bytes(usize::MAX), 64 * MIB);
    assert_eq!(
        PoolConfig::default().with_conf("").unwrap(),
        PoolConfig::default()
    );
}

fn refusal(conf: &str) -> String {
    match PoolConfig::default().with_conf(conf) {
        Err(e @ Error::Config(c)) => {
            assert_eq!(c.variable, "ACLALLOC_ALLOC_CONF");
            e.to_string()
        }
        other => panic!("{conf}: {other:?}"),
    }
}

#[test]
fn errors_name_the_key_the_value_and_what_is_accepted() {
    // Every key, the six PyTorch ones first.
    let keys =
        "max_split_size_mb, garbage_collection_threshold, memory_limit_mb, memory_fraction, \
        expandable_segments, roundup_power2_divisions, per_process_memory_fraction, \
        pin_memory_expandable_segments, pinned_mem_register, pinned_use_background_threads, \
        pinned_reserve_segment_size_mb, release_lock_on_npumalloc, multi_stream_lazy_reclaim, \
        base_addr_aligned_kb, page_size, segment_size_mb, large_segment_size_mb, \
        max_non_split_rounding_mb";
    assert_eq!(
        refusal("max_split_sizemb:128"),
        format!("Environment variable ACLALLOC_ALLOC_CONF is invalid. Reason: unknown key \"max_split_sizemb\" in \"max_split_sizemb:128\"; accepted keys: {keys}")
    );
    assert_eq!(
        refusal("expandable_segments:maybe"),
        "Environment variable ACLALLOC_ALLOC_CONF is invalid. Reason: the value \"maybe\" of expandable_segments is not accepted; accepted: a truth value: True, False, 1, 0, yes, no, on, off (any case)"
    );
    assert_eq!(
        refusal("roundup_power2_divisions:3"),
        format!("Environment variable ACLALLOC_ALLOC_CONF is invalid. Reason: the value \"3\" of roundup_power2_divisions is not accepted; accepted: {}", roundup::ACCEPTED)
    );
    assert!(roundup::ACCEPTED.starts_with(
        "a power of two (divisions for every size), or [MiB:divisions,...,>:divisions]"
    ));
    assert_eq!(
        refusal("large_segment_size_mb:64"),
        "Environment variable ACLALLOC_ALLOC_CONF is invalid. Reason: the value \"64\" of large_segment_size_mb is not accepted; accepted: no value: this torch_npu key is not implemented by aclalloc (its segments keep PyTorch's default sizes); remove it"
    );
    assert_eq!(
        refusal("memory_fraction:0.5,per_process_memory_fraction:0.5"),
        "Environment variable ACLALLOC_ALLOC_CONF is invalid. Reason: memory_fraction and per_process_memory_fraction contradict each other: both set the pool's limit; give one of them"
    );
    assert_eq!(
        refusal("memory_fraction:2"),
        "Environment variable ACLALLOC_ALLOC_CONF is invalid. Reason: the value \"2\" of memory_fraction is not accepted; accepted: a number larger than 0 and at most 1"
    );
    assert_eq!(
        refusal("memory_limit_mb:100,memory_fraction:0.5"),
        "Environment variable ACLALLOC_ALLOC_CONF is invalid. Reason: memory_limit_mb and memory_fraction contradict each other: both set the pool's limit; give one of them"
    );
    assert_eq!(
        refusal("max_split_size_mb:64,max_split_size_mb:128"),
        "Environment variable ACLALLOC_ALLOC_CONF is invalid. Reason: max_split_size_mb is given more than once; give each key once"
    );
}

#[test]
fn refuses_unknown_keys_and_bad_values() {
    for bad in [
        "max_split_size_mb",
        "max_split_size_mb:0.5",
        "max_split_size_mb:abc",
        "garbage_collection_threshold:1.5",
        "memory_fraction:0",
        "memory_fraction:2",
        "memory_limit_mb:-3",
        "memory_limit_mb:inf",
        "garbage_collection_threshold:",
        "expandable_segments:",
        "expandable_segments:2",
        "expandable_segments:Truee",
        "roundup_power2_divisions:0",
        "roundup_power2_divisions:[256:1,512:3]",
        "roundup_power2_divisions:[300:1]",
        "roundup_power2_divisions:[256:1,512:2",
        "per_process_memory_fraction:0",
        "base_addr_aligned_kb:17",
        "page_size:2m",
        "pinned_mem_register:sometimes",
        "segment_size_mb:64",
        "max_non_split_rounding_mb:64",
        "backend:native",
        "expandable_segments:True,expandable_segments:False",
        "memory_fraction:0.5,memory_limit_mb:1",
        "memory_fraction:0.5,memory_fraction:0.5",
    ] {
        refusal(bad);
    }
}

#[test]
fn expandable_segments_takes_a_truth_value() {
    for (value, expected) in [
        ("True", true),
        ("False", false),
        ("true", true),
        ("1", true),
        ("off", false),
    ] {
        let c = PoolConfig::default()
            .with_conf(&format!("expandable_segments:{value}"))
            .unwrap();
        assert_eq!(c.expandable_segments, expected, "{value}");
    }
}

#[test]
fn roundup_power2_divisions_as_a_number_or_per_interval() {
    let c = PoolConfig::default()
        .with_conf("roundup_power2_divisions:4")
        .unwrap();
    assert_eq!(
        c.roundup_power2_divisions,
        RoundupDivisions::uniform(4).unwrap()
    );
    assert_eq!(
        c.roundup_power2_divisions.round(1200 * MIB),
        Some(1280 * MIB)
    );
    let c = PoolConfig::default()
        .with_conf("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]")
        .unwrap();
    let d = c.roundup_power2_divisions;
    assert_eq!(
        [
            d.for_size(MIB),
            d.for_size(300 * MIB),
            d.for_size(600 * MIB),
            d.for_size(1200 * MIB),
            d.for_size(4096 * MIB)
        ],
        [1, 1, 2, 4, 8]
    );
}

#[test]
fn a_torch_npu_string_works_unchanged() {
    let conf = "expandable_segments:True,max_split_size_mb:512,garbage_collection_threshold:0.6,roundup_power2_divisions:[256:1,512:2,1024:4,>:8]";
    let c = PoolConfig::default().with_conf(conf).unwrap();
    assert!(c.expandable_segments);
    assert_eq!(c.max_split_size, 512 * MIB);
    assert_eq!(c.garbage_collection_threshold, 0.6);
    assert_eq!(
        c.roundup_power2_divisions.round(1200 * MIB),
        Some(1280 * MIB)
    );
    assert_eq!(c.limit, Limit::None);
    // torch_npu's keys for pinned host memory, its threads and locks:
    // accepted, checked, no effect.
    let harmless = "pin_memory_expandable_segments:False,pinned_mem_register:True,pinned_use_background_threads:True,pinned_reserve_segment_size_mb:64,release_lock_on_npumalloc:True,multi_stream_lazy_reclaim:False,base_addr_aligned_kb:16,page_size:1g";
    assert_eq!(
        PoolConfig::default().with_conf(harmless).unwrap(),
        PoolConfig::default()
    );
    let c = PoolConfig::default()
        .with_conf("per_process_memory_fraction:0.75")
        .unwrap();
    assert_eq!(c.limit, Limit::Fraction(0.75));
}

#[test]
fn off_rounds_to_512_bytes() {
    let off = RoundupDivisions::default();
    assert_eq!(off.round(1), Some(512));
    assert_eq!(off.round(513), Some(1024));
    assert_eq!(off.round(5 * MIB + 1), Some(5 * MIB + 512));
}

#[test]
fn uniform_divisions_match_pytorch() {
    let four = RoundupDivisions::uniform(4).unwrap();
    // 1200 MiB lies between 1024 and 2048: steps of 256 MiB -> 1280 MiB.
    assert_eq!(four.round(1200 * MIB), Some(1280 * MIB));
    assert_eq!(four.round(1280 * MIB), Some(1280 * MIB));
    assert_eq!(four.round(1024 * MIB), Some(1024 * MIB));
    // 5 MiB + 1: between 4 and 8 MiB, steps of 1 MiB -> 6 MiB.
    assert_eq!(four.round(5 * MIB + 1), Some(6 * MIB));
    // At most 512 x divisions: plain rounding.
    assert_eq!(four.round(2000), Some(2048));
    assert_eq!(four.round(2049), Some(2560));
    assert_eq!(RoundupDivisions::uniform(3), None);
    assert_eq!(four.round(usize::MAX - 5), None);
}

#[test]
fn per_interval_table_follows_pytorch() {
    // [256:1,512:2,>:4]: 256 sets [256, 512) MiB and everything below,
    // 512 sets [512, 1024) MiB, `>` everything from 1 GiB on.
    let t = RoundupDivisions::per_interval(&[(Some(256), 1), (Some(512), 2), (None, 4)]).unwrap();
    assert_eq!(t.for_size(MIB), 1);
    assert_eq!(t.for_size(300 * MIB), 1);
    assert_eq!(t.for_size(600 * MIB), 2);
    assert_eq!(t.for_size(1024 * MIB), 4);
    assert_eq!(t.for_size(2048 * MIB), 4);
    assert_eq!(t.for_size(1 << 40), 4, "past 64 GiB: the last interval");
    // 600 MiB with 2 divisions: steps of 256 MiB between 512 and 1024.
    assert_eq!(t.round(600 * MIB), Some(768 * MIB));
    assert_eq!(t.round(300 * MIB), Some(300 * MIB));
    // 1200 MiB with 4 divisions: steps of 256 MiB between 1 and 2 GiB.
    assert_eq!(t.round(1200 * MIB), Some(1280 * MIB));
    let two = RoundupDivisions::per_interval(&[(Some(256), 1), (Some(512), 2)]).unwrap();
    assert_eq!(two.for_size(2048 * MIB), 0, "not set: plain rounding");
    assert_eq!(two.round(2048 * MIB + 1), Some(2048 * MIB + 512));
    assert_eq!(RoundupDivisions::per_interval(&[(Some(300), 2)]), None);
    assert_eq!(RoundupDivisions::per_interval(&[(Some(256), 3)]), None);
    // 0 divisions in a list: plain rounding for that interval.
    let zero = RoundupDivisions::per_interval(&[(Some(1), 4), (Some(2), 0)]).unwrap();
    assert_eq!(zero.round(3 * MIB + 1), Some(3 * MIB + 512));
    assert_eq!(zero.round(MIB + 1), Some(MIB + MIB / 4));
}

#[test]
fn parses_pytorch_syntax_with_its_quirks() {
    let parse = RoundupDivisions::parse;
    assert_eq!(parse("4"), RoundupDivisions::uniform(4));
    assert_eq!(parse(" 1 "), Some(RoundupDivisions([1; ROUNDUP_INTERVALS])));
    for bad in [
        "0", "3", "-4", "4.0", "x", "", "[256:1", "256:1]", "[256]", "[256:3]",
    ] {
        assert_eq!(parse(bad), None, "{bad:?}");
    }
    for bad in ["[300:2]", "[0:2]", "[256:1,x:2]", "[>:3]", "[256:1,512:-2]"] {
        assert_eq!(parse(bad), None, "{bad:?}");
    }
    let t = parse("[256:1, 512:2, 1024:4, >:8]").unwrap();
    let mut want = [1usize; ROUNDUP_INTERVALS];
    want[9] = 2;
    want[10] = 4;
    want[11..].fill(8);
    assert_eq!(t.0, want);
    // The first start fills below it, not the later ones.
    let t = parse("[64:2,16:8]").unwrap();
    assert_eq!(&t.0[..7], &[2, 2, 2, 2, 8, 2, 2]);
    // `>` first: every interval after the first; the first stays 0.
    let t = parse("[>:4]").unwrap();
    assert_eq!(t.0[0], 0);
    assert!(t.0[1..].iter().all(|&d| d == 4));
    // Starts past 32 GiB all set the last interval.
    let t = parse("[65536:2]").unwrap();
    assert_eq!(t.0, [2; ROUNDUP_INTERVALS]);
    assert_eq!(parse("[]"), Some(RoundupDivisions::default()));
    assert_eq!(parse("[256:1,]"), parse("[256:1]"));
}

#[test]
fn small_requests_use_the_first_interval() {
    let four = RoundupDivisions::uniform(4).unwrap();
    assert_eq!(four.round(3000), Some(3072));
    assert_eq!(four.round(0), Some(512));
    assert!(four.is_set());
    assert!(!RoundupDivisions::uniform(1).unwrap().is_set());
    assert!(!RoundupDivisions::default().is_set());
}
