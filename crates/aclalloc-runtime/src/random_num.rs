//! `aclrtRandomNumAsync`: the device's random-number task (its DSA
//! engine), in stream order: `num` numbers of a data type from a uniform,
//! normal or truncated normal distribution, or a dropout bitmask.
//!
//! The numbers come from Philox4x32-10 keyed by the seed, its 128-bit
//! counter starting at the 16 bytes at `randomCounterAddr` (little-endian),
//! and that counter is advanced past the blocks used, so the next task
//! with the same seed and counter memory continues the sequence. The
//! device's own sequence is not reproduced: what a program may rely on is
//! the distribution and the seed's determinism, which these keep.
//!
//! - Uniform: floats in `[min, max)` (computed in `f32`, rounded to the
//!   type, and a value rounded up to `max` taken one step down), integers
//!   in `[min, max)` (`min` when `max <= min`).
//! - Normal: `mean + stddev * z` with `z` standard normal (Box-Muller);
//!   truncated normal redraws `z` until `|z| <= 2`.
//! - Dropout bitmask: one bit per number, least significant first, 1 for
//!   a kept element (probability `1 - ratio`), 0 for a dropped one; the
//!   result is `ceil(num / 8)` bytes. `dataType` is the ratio's type.
//!
//! A parameter given by address (`isAddr` 1) is read from device memory
//! when the task runs, as the device reads it. Checked when queued, as
//! CANN checks them: the data type for the function, `isAddr` 0 or 1, each
//! size from 1 to the type's size (8 for an address, the seed and the
//! count), non-NULL result and counter; and on the host, every address as
//! live device memory of the size the task touches.

use super::half;
use super::host::HostRuntime;
use super::owned_task::{self, Job};
use super::stream_worker::fail_current_task;
use crate::base::error::{Error, Result, ACL_ERROR_RT_INTERNAL_ERROR};
use crate::registry::StreamKey;

/// `ACL_RT_RANDOM_NUM_FUNC_TYPE_DROPOUT_BITMASK`.
pub const FUNC_DROPOUT_BITMASK: i32 = 0;
/// `ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS`.
pub const FUNC_UNIFORM: i32 = 1;
/// `ACL_RT_RANDOM_NUM_FUNC_TYPE_NORMAL_DIS`.
pub const FUNC_NORMAL: i32 = 2;
/// `ACL_RT_RANDOM_NUM_FUNC_TYPE_TRUNCATED_NORMAL_DIS`.
pub const FUNC_TRUNCATED_NORMAL: i32 = 3;

/// One parameter (`aclrtRandomParaInfo`): a value of `size` bytes, or
/// (`is_addr` 1) the address of one.
#[derive(Clone, Copy, Debug, Default)]
pub struct RandomParam {
    pub is_addr: u8,
    pub value_or_addr: [u8; 8],
    pub size: u8,
}

/// A random-number task (`aclrtRandomNumTaskInfo`).
#[derive(Clone, Copy, Debug, Default)]
pub struct RandomTask {
    /// `aclDataType`.
    pub data_type: i32,
    /// `aclrtRandomNumFuncType`.
    pub func: i32,
    /// The distribution's parameters: the ratio (dropout), min and max
    /// (uniform), mean and stddev (normal); the dropout's second is unused.
    pub params: [RandomParam; 2],
    pub para_addr: usize,
    pub result: usize,
    pub counter: usize,
    pub seed: RandomParam,
    pub num: RandomParam,
}

/// The data types the task produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    I32,
    I64,
    U32,
    U64,
    Bf16,
    F16,
    F32,
}

impl Kind {
    fn from_acl(data_type: i32) -> Result<Self> {
        Ok(match data_type {
            3 => Kind::I32,
            9 => Kind::I64,
            8 => Kind::U32,
            10 => Kind::U64,
            27 => Kind::Bf16,
            1 => Kind::F16,
            0 => Kind::F32,
            _ => {
                return Err(Error::InvalidParam {
                    param: "taskInfo->dataType",
                    reason: "The data type is currently not supported",
                })
            }
        })
    }

    fn size(self) -> usize {
        match self {
            Kind::Bf16 | Kind::F16 => 2,
            Kind::I32 | Kind::U32 | Kind::F32 => 4,
            Kind::I64 | Kind::U64 => 8,
        }
    }

    fn is_float(self) -> bool {
        matches!(self, Kind::Bf16 | Kind::F16 | Kind::F32)
    }

    /// A parameter's raw bits as a float of this kind.
    fn float(self, raw: u64) -> f32 {
        match self {
            Kind::Bf16 => half::bf16_to_f32(raw as u16),
            Kind::F16 => half::f16_to_f32(raw as u16),
            _ => f32::from_bits(raw as u32),
        }
    }

    /// `v` as this float kind's bits.
    fn encode(self, v: f32) -> u64 {
        match self {
            Kind::Bf16 => u64::from(half::f32_to_bf16(v)),
            Kind::F16 => u64::from(half::f32_to_f16(v)),
            _ => u64::from(v.to_bits()),
        }
    }

    /// The float of this kind just below the finite one `bits` encodes
    /// (toward negative infinity; below a zero, the smallest negative).
    fn below(self, bits: u64) -> u64 {
        let sign = match self {
            Kind::Bf16 | Kind::F16 => 0x8000,
            _ => 0x8000_0000,
        };
        if bits & (sign - 1) == 0 {
            sign | 1
        } else if bits & sign == 0 {
            bits - 1
        } else {
            bits + 1
        }
    }

    /// A parameter's raw bits as an integer of this kind.
    fn int(self, raw: u64) -> i128 {
        match self {
            Kind::I32 => i128::from(raw as u32 as i32),
            Kind::I64 => i128::from(raw as i64),
            Kind::U32 => i128::from(raw as u32),
            _ => i128::from(raw),
        }
    }
}

fn param_invalid(param: &'static str) -> Error {
    Error::InvalidParam {
        param,
        reason:
            "isAddr must be 0 or 1, and size from 1 to the size of its value (8 for an address)",
    }
}

/// Checks a parameter whose value is of `value_size` bytes.
fn check_param(p: &RandomParam, value_size: usize, param: &'static str) -> Result<()> {
    let max = if p.is_addr == 1 { 8 } else { value_size };
    if p.is_addr > 1 || p.size == 0 || usize::from(p.size) > max {
        return Err(param_invalid(param));
    }
    Ok(())
}

/// The little-endian number in the first `size` bytes of `bytes`.
fn le(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .rev()
        .fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
}

impl RandomParam {
    fn address(&self) -> usize {
        u64::from_le_bytes(self.value_or_addr) as usize
    }

    /// The parameter's value: its own bytes, or `value_size` bytes read at
    /// its address.
    ///
    /// # Safety
    /// By address: `value_size` bytes there are readable (checked as
    /// device memory when the task was queued).
    unsafe fn read(&self, value_size: usize) -> u64 {
        if self.is_addr == 1 {
            let mut bytes = [0u8; 8];
            let n = value_size.min(8);
            // SAFETY: the function's contract.
            unsafe {
                std::ptr::copy_nonoverlapping(self.address() as *const u8, bytes.as_mut_ptr(), n)
            };
            le(&bytes[..n])
        } else {
            le(&self.value_or_addr[..usize::from(self.size).min(8)])
        }
    }
}

/// Philox4x32-10: four 32-bit words per 128-bit counter value.
struct Philox {
    key: [u32; 2],
    counter: u128,
    block: [u32; 4],
    used: usize,
    blocks: u128,
}

impl Philox {
    fn new(seed: u64, counter: u128) -> Self {
        Philox {
            key: [seed as u32, (seed >> 32) as u32],
            counter,
            block: [0; 4],
            used: 4,
            blocks: 0,
        }
    }

    fn next_u32(&mut self) -> u32 {
        if self.used == 4 {
            self.block = philox_block(self.counter, self.key);
            self.counter = self.counter.wrapping_add(1);
            self.blocks += 1;
            self.used = 0;
        }
        self.used += 1;
        self.block[self.used - 1]
    }

    fn next_u64(&mut self) -> u64 {
        (u64::from(self.next_u32()) << 32) | u64::from(self.next_u32())
    }

    /// Uniform in `[0, 1)`, 24 random bits.
    fn unit(&mut self) -> f32 {
        (self.next_u32() >> 8) as f32 * (1.0 / 16_777_216.0)
    }

    /// Standard normal (Box-Muller).
    fn normal(&mut self) -> f64 {
        let u1 = 1.0 - f64::from(self.next_u32()) / 4_294_967_296.0; // (0, 1]
        let u2 = f64::from(self.next_u32()) / 4_294_967_296.0;
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

fn philox_block(counter: u128, key: [u32; 2]) -> [u32; 4] {
    const M0: u64 = 0xD251_1F53;
    const M1: u64 = 0xCD9E_8D57;
    const W0: u32 = 0x9E37_79B9;
    const W1: u32 = 0xBB67_AE85;
    let mut c = [
        counter as u32,
        (counter >> 32) as u32,
        (counter >> 64) as u32,
        (counter >> 96) as u32,
    ];
    let mut k = key;
    for round in 0..10 {
        if round > 0 {
            k = [k[0].wrapping_add(W0), k[1].wrapping_add(W1)];
        }
        let p0 = M0 * u64::from(c[0]);
        let p1 = M1 * u64::from(c[2]);
        c = [
            (p1 >> 32) as u32 ^ c[1] ^ k[0],
            p1 as u32,
            (p0 >> 32) as u32 ^ c[3] ^ k[1],
            p0 as u32,
        ];
    }
    c
}

/// A queued task, its parameters resolved as far as they can be before it runs.
struct Queued {
    task: RandomTask,
    kind: Kind,
    /// How many bytes from `task.result` the task may write.
    room: usize,
}

impl Queued {
    fn bytes_for(&self, num: u64) -> Option<usize> {
        let num = usize::try_from(num).ok()?;
        if self.task.func == FUNC_DROPOUT_BITMASK {
            Some(num.div_ceil(8))
        } else {
            num.checked_mul(self.kind.size())
        }
    }
}

impl Job for Queued {
    fn run(self: Box<Self>) {
        let t = &self.task;
        // SAFETY: every address was checked as live device memory of the
        // size read when the task was queued, and `aclrtFree` waits for
        // queued work.
        let (seed, num, first, second, counter) = unsafe {
            let mut counter = [0u8; 16];
            std::ptr::copy_nonoverlapping(t.counter as *const u8, counter.as_mut_ptr(), 16);
            (
                t.seed.read(8),
                t.num.read(8),
                t.params[0].read(self.kind.size()),
                t.params[1].read(self.kind.size()),
                u128::from_le_bytes(counter),
            )
        };
        let Some(bytes) = self.bytes_for(num).filter(|&b| b <= self.room) else {
            // A count read from device memory that overruns the result:
            // the task fails, as the device's would, and writes nothing.
            let _ = fail_current_task(ACL_ERROR_RT_INTERNAL_ERROR);
            return;
        };
        let mut rng = Philox::new(seed, counter);
        // SAFETY: `bytes <= room`, the live device memory from `result` on.
        let out = unsafe { std::slice::from_raw_parts_mut(t.result as *mut u8, bytes) };
        generate(
            &mut rng,
            t.func,
            self.kind,
            first,
            second,
            num as usize,
            out,
        );
        let advanced = counter.wrapping_add(rng.blocks).to_le_bytes();
        // SAFETY: the counter's 16 bytes, checked as above.
        unsafe { std::ptr::copy_nonoverlapping(advanced.as_ptr(), t.counter as *mut u8, 16) };
    }
}

/// Writes `num` numbers of `func` into `out` (sized for them).
fn generate(
    rng: &mut Philox,
    func: i32,
    kind: Kind,
    first: u64,
    second: u64,
    num: usize,
    out: &mut [u8],
) {
    if func == FUNC_DROPOUT_BITMASK {
        let ratio = kind.float(first);
        out.fill(0);
        for i in 0..num {
            if rng.unit() >= ratio {
                out[i / 8] |= 1 << (i % 8);
            }
        }
        return;
    }
    let size = kind.size();
    for slot in out.chunks_exact_mut(size).take(num) {
        if kind.is_float() {
            let v = match func {
                FUNC_UNIFORM => {
                    let (min, max) = (kind.float(first), kind.float(second));
                    min + rng.unit() * (max - min)
                }
                _ => {
                    let (mean, stddev) = (kind.float(first), kind.float(second));
                    let mut z = rng.normal();
                    while func == FUNC_TRUNCATED_NORMAL && z.abs() > 2.0 {
                        z = rng.normal();
                    }
                    (f64::from(mean) + f64::from(stddev) * z) as f32
                }
            };
            let mut bits = kind.encode(v);
            if func == FUNC_UNIFORM {
                // Rounding may reach `max` (1 + u, u just below 1, rounds
                // to 2 in f32): the value below it, so the range stays open.
                let (min, max) = (kind.float(first), kind.float(second));
                if max > min && kind.float(bits) >= max {
                    bits = kind.below(bits);
                }
            }
            slot.copy_from_slice(&bits.to_le_bytes()[..size]);
        } else {
            let (min, max) = (kind.int(first), kind.int(second));
            let v = if max > min {
                min + (u128::from(rng.next_u64()) % (max - min) as u128) as i128
            } else {
                min
            };
            slot.copy_from_slice(&(v as u64).to_le_bytes()[..size]);
        }
    }
}

impl HostRuntime {
    /// `aclrtRandomNumAsync`: checks `task` as CANN does and queues it on
    /// `stream`.
    pub fn random_num_async(&self, task: &RandomTask, stream: Option<StreamKey>) -> Result<()> {
        let kind = Kind::from_acl(task.data_type)?;
        let fits = match task.func {
            FUNC_UNIFORM => true,
            FUNC_DROPOUT_BITMASK | FUNC_NORMAL | FUNC_TRUNCATED_NORMAL => kind.is_float(),
            _ => {
                return Err(Error::InvalidParam {
                    param: "taskInfo->randomNumFuncParaInfo.funcType",
                    reason: "It is not an aclrtRandomNumFuncType value",
                })
            }
        };
        if !fits {
            return Err(Error::InvalidParam {
                param: "taskInfo->dataType",
                reason: "Dropout bitmasks and normal distributions take bf16, fp16 or fp32 only",
            });
        }
        if task.counter == 0 {
            return Err(Error::NullPointer {
                param: "taskInfo->randomCounterAddr",
            });
        }
        if task.result == 0 {
            return Err(Error::NullPointer {
                param: "taskInfo->randomResultAddr",
            });
        }
        check_param(&task.seed, 8, "taskInfo->randomSeed")?;
        check_param(&task.num, 8, "taskInfo->randomNum")?;
        let used = if task.func == FUNC_DROPOUT_BITMASK {
            1
        } else {
            2
        };
        for p in &task.params[..used] {
            check_param(p, kind.size(), "taskInfo->randomNumFuncParaInfo.paramInfo")?;
        }
        // The host's checks: every address the task reads or writes.
        self.check_device_range(
            task.counter as *const u8,
            16,
            "taskInfo->randomCounterAddr",
            true,
        )?;
        for (p, size, name) in [
            (&task.seed, 8, "taskInfo->randomSeed"),
            (&task.num, 8, "taskInfo->randomNum"),
            (
                &task.params[0],
                kind.size(),
                "taskInfo->randomNumFuncParaInfo.paramInfo",
            ),
            (
                &task.params[1],
                kind.size(),
                "taskInfo->randomNumFuncParaInfo.paramInfo",
            ),
        ]
        .into_iter()
        .take(2 + used)
        {
            if p.is_addr == 1 {
                self.check_device_range(p.address() as *const u8, size, name, true)?;
            }
        }
        let mut queued = Queued {
            task: *task,
            kind,
            room: 0,
        };
        queued.room = if task.num.is_addr == 1 {
            self.room(task.result)
        } else {
            // SAFETY: a value parameter: its own bytes.
            let num = unsafe { task.num.read(8) };
            let bytes = queued.bytes_for(num).ok_or(Error::InvalidParam {
                param: "taskInfo->randomNum",
                reason: "The numbers do not fit in the address space",
            })?;
            self.check_device_range(
                task.result as *const u8,
                bytes,
                "taskInfo->randomResultAddr",
                true,
            )?;
            bytes
        };
        if task.para_addr != 0 {
            // CANN writes the distribution's two parameters there (16 bytes).
            self.check_device_range(
                task.para_addr as *const u8,
                16,
                "taskInfo->randomParaAddr",
                true,
            )?;
        }
        let (_, s) = self.resolve_stream(stream)?;
        if task.para_addr != 0 {
            let mut block = [0u8; 16];
            for (i, p) in task.params[..used].iter().enumerate() {
                let n = usize::from(p.size).min(8);
                block[i * 8..i * 8 + n].copy_from_slice(&p.value_or_addr[..n]);
            }
            // SAFETY: checked as 16 bytes of live device memory above.
            unsafe { std::ptr::copy_nonoverlapping(block.as_ptr(), task.para_addr as *mut u8, 16) };
        }
        owned_task::enqueue(&s, queued)
    }

    /// How many bytes of live device memory start at `ptr` (0 when none does).
    fn room(&self, ptr: usize) -> usize {
        let fits = |len: usize| {
            self.check_device_range(ptr as *const u8, len, "", true)
                .is_ok()
        };
        if !fits(1) {
            return 0;
        }
        let mut ok = 1usize;
        while ok < (1 << 46) && fits(ok * 2) {
            ok *= 2;
        }
        let mut bad = ok * 2;
        while bad - ok > 1 {
            let mid = ok + (bad - ok) / 2;
            if fits(mid) {
                ok = mid;
            } else {
                bad = mid;
            }
        }
        ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn philox_matches_its_published_known_answer() {
        // Random123's known-answer test for philox4x32-10, counter and key 0.
        assert_eq!(
            philox_block(0, [0, 0]),
            [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]
        );
    }

    #[test]
    fn distributions_keep_their_ranges_and_the_seed_decides() {
        let mut out = vec![0u8; 4 * 1000];
        let int = |v: i32| u64::from(v as u32);
        generate(
            &mut Philox::new(7, 0),
            FUNC_UNIFORM,
            Kind::I32,
            int(-5),
            int(5),
            1000,
            &mut out,
        );
        let values: Vec<i32> = out
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert!(values.iter().all(|v| (-5..5).contains(v)));
        assert!(values.contains(&-5) && values.contains(&4));
        let mut again = vec![0u8; 4 * 1000];
        generate(
            &mut Philox::new(7, 0),
            FUNC_UNIFORM,
            Kind::I32,
            int(-5),
            int(5),
            1000,
            &mut again,
        );
        assert_eq!(out, again);

        let f = |v: f32| u64::from(v.to_bits());
        generate(
            &mut Philox::new(1, 0),
            FUNC_TRUNCATED_NORMAL,
            Kind::F32,
            f(3.0),
            f(2.0),
            1000,
            &mut out,
        );
        let values: Vec<f32> = out
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert!(values.iter().all(|v| (-1.0..=7.0).contains(v)));
        let mean = values.iter().sum::<f32>() / 1000.0;
        assert!((mean - 3.0).abs() < 0.2, "{mean}");

        // 1 + u rounds to 2 for the largest u: never the open end.
        for kind in [Kind::F32, Kind::F16, Kind::Bf16] {
            let (lo, hi) = (kind.encode(1.0), kind.encode(2.0));
            let mut out = vec![0u8; kind.size() * 4000];
            generate(
                &mut Philox::new(3, 0),
                FUNC_UNIFORM,
                kind,
                lo,
                hi,
                4000,
                &mut out,
            );
            for e in out.chunks_exact(kind.size()) {
                let mut raw = [0u8; 8];
                raw[..e.len()].copy_from_slice(e);
                let v = kind.float(u64::from_le_bytes(raw));
                assert!((1.0..2.0).contains(&v), "{kind:?}: {v}");
            }
        }
        assert_eq!(Kind::F32.below(0), 0x8000_0001);
        assert_eq!(Kind::F16.below(0x3C00), 0x3BFF);
        assert_eq!(Kind::F16.below(0xBC00), 0xBC01);

        let mut mask = vec![0u8; 125];
        generate(
            &mut Philox::new(1, 0),
            FUNC_DROPOUT_BITMASK,
            Kind::F32,
            f(0.25),
            0,
            1000,
            &mut mask,
        );
        let kept: u32 = mask.iter().map(|b| b.count_ones()).sum();
        assert!((700..800).contains(&kept), "{kept}");
    }
}
