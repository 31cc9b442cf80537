//! `aclrtReduceAsync`: the SDMA engine's reduce, `dst[i] = dst[i] op
//! src[i]` element by element over `count` bytes, in stream order.
//!
//! The kinds (`aclrtReduceKind`) are SUM, MAX and MIN; EQUAL is refused
//! with `ACL_ERROR_RT_FEATURE_NOT_SUPPORT`, as CANN refuses it off its
//! STARS hardware. The data types are those CANN's reference lists for its
//! SoCs: int8, int16, int32, uint32, fp16, bf16 and fp32; the other types
//! CANN maps (int4, uint8, uint16) no SoC reduces, and are refused the
//! same way. 16-bit floats are reduced through `f32` and rounded to
//! nearest even; integer sums wrap.

use super::half;
use super::host::HostRuntime;
use super::owned_task::{self, Job};
use crate::base::error::{Error, Result, ACL_ERROR_RT_ADDR_UNALIGNED};
use crate::registry::StreamKey;

/// `ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM`.
pub const REDUCE_SUM: i32 = 10;
/// `ACL_RT_MEMCPY_SDMA_AUTOMATIC_MAX`.
pub const REDUCE_MAX: i32 = 11;
/// `ACL_RT_MEMCPY_SDMA_AUTOMATIC_MIN`.
pub const REDUCE_MIN: i32 = 12;
/// `ACL_RT_MEMCPY_SDMA_AUTOMATIC_EQUAL`.
pub const REDUCE_EQUAL: i32 = 13;

/// The element types a reduce computes in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Element {
    I8,
    I16,
    I32,
    U32,
    F16,
    Bf16,
    F32,
}

impl Element {
    /// From an `aclDataType` value.
    fn from_acl(data_type: i32) -> Result<Self> {
        Ok(match data_type {
            0 => Element::F32,
            1 => Element::F16,
            2 => Element::I8,
            3 => Element::I32,
            6 => Element::I16,
            8 => Element::U32,
            27 => Element::Bf16,
            // ACL_UINT8, ACL_UINT16, ACL_INT4: CANN takes them, no SoC reduces them.
            4 | 7 | 29 => {
                return Err(Error::FeatureNotSupported {
                    what:
                        "The current SoC does not support the reduction operation of this data type",
                })
            }
            _ => {
                return Err(Error::InvalidParam {
                    param: "type",
                    reason: "The data type is currently not supported",
                })
            }
        })
    }

    fn size(self) -> usize {
        match self {
            Element::I8 => 1,
            Element::I16 | Element::F16 | Element::Bf16 => 2,
            Element::I32 | Element::U32 | Element::F32 => 4,
        }
    }
}

/// The operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Sum,
    Max,
    Min,
}

impl Op {
    fn int(self, a: i64, b: i64) -> i64 {
        match self {
            Op::Sum => a.wrapping_add(b),
            Op::Max => a.max(b),
            Op::Min => a.min(b),
        }
    }

    fn float(self, a: f32, b: f32) -> f32 {
        match self {
            Op::Sum => a + b,
            Op::Max => a.max(b),
            Op::Min => a.min(b),
        }
    }
}

/// A queued reduce.
struct Reduce {
    dst: usize,
    src: usize,
    count: usize,
    element: Element,
    op: Op,
}

impl Job for Reduce {
    fn run(self: Box<Self>) {
        let n = self.count / self.element.size();
        let (dst, src) = (self.dst as *mut u8, self.src as *const u8);
        for i in 0..n {
            let at = i * self.element.size();
            // SAFETY: both ranges were checked as live device memory of
            // `count` bytes when the reduce was queued, and `aclrtFree`
            // waits for queued work; unaligned, as the ranges may overlap
            // anywhere. `i < n` keeps each element inside them.
            unsafe { reduce_one(dst.add(at), src.add(at), self.element, self.op) };
        }
    }
}

/// `*dst = *dst op *src` for one element.
///
/// # Safety
/// `dst` and `src` are valid for an element of `element`.
unsafe fn reduce_one(dst: *mut u8, src: *const u8, element: Element, op: Op) {
    macro_rules! ints {
        ($t:ty) => {{
            // SAFETY: the function's contract.
            let (a, b) = unsafe {
                (
                    dst.cast::<$t>().read_unaligned(),
                    src.cast::<$t>().read_unaligned(),
                )
            };
            let r = op.int(i64::from(a), i64::from(b)) as $t;
            // SAFETY: as above.
            unsafe { dst.cast::<$t>().write_unaligned(r) }
        }};
    }
    macro_rules! floats {
        ($t:ty, $to:path, $from:path) => {{
            // SAFETY: the function's contract.
            let (a, b) = unsafe {
                (
                    dst.cast::<$t>().read_unaligned(),
                    src.cast::<$t>().read_unaligned(),
                )
            };
            let r = $from(op.float($to(a), $to(b)));
            // SAFETY: as above.
            unsafe { dst.cast::<$t>().write_unaligned(r) }
        }};
    }
    match element {
        Element::I8 => ints!(i8),
        Element::I16 => ints!(i16),
        Element::I32 => ints!(i32),
        Element::U32 => ints!(u32),
        Element::F16 => floats!(u16, half::f16_to_f32, half::f32_to_f16),
        Element::Bf16 => floats!(u16, half::bf16_to_f32, half::f32_to_bf16),
        Element::F32 => floats!(f32, std::convert::identity, std::convert::identity),
    }
}

impl HostRuntime {
    /// `aclrtReduceAsync`: queues `dst[i] = dst[i] kind src[i]` over
    /// `count` bytes of `data_type` elements on `stream`. Both ranges must
    /// be live device memory, aligned to the element's size.
    pub fn reduce_async(
        &self,
        dst: *mut u8,
        src: *const u8,
        count: u64,
        kind: i32,
        data_type: i32,
        stream: Option<StreamKey>,
    ) -> Result<()> {
        let element = Element::from_acl(data_type)?;
        let op = match kind {
            REDUCE_SUM => Op::Sum,
            REDUCE_MAX => Op::Max,
            REDUCE_MIN => Op::Min,
            REDUCE_EQUAL => {
                return Err(Error::FeatureNotSupported {
                    what: "ACL_RT_MEMCPY_SDMA_AUTOMATIC_EQUAL(13) is only supported on STARS platform hardware",
                })
            }
            _ => {
                return Err(Error::InvalidParam {
                    param: "kind",
                    reason: "It is not an aclrtReduceKind value",
                })
            }
        };
        let count = usize::try_from(count).map_err(|_| Error::InvalidParam {
            param: "count",
            reason: "It is larger than the address space",
        })?;
        if count % element.size() != 0 {
            return Err(Error::InvalidParam {
                param: "count",
                reason: "It must be a whole number of elements of the data type",
            });
        }
        for (ptr, param) in [(dst as usize, "dst"), (src as usize, "src")] {
            if ptr % element.size() != 0 {
                return Err(Error::Capture {
                    code: ACL_ERROR_RT_ADDR_UNALIGNED,
                    reason: match param {
                        "dst" => "dst is not aligned to the size of the data type",
                        _ => "src is not aligned to the size of the data type",
                    },
                });
            }
        }
        self.check_device_range(dst, count, "dst", true)?;
        self.check_device_range(src, count, "src", true)?;
        let (_, stream) = self.resolve_stream(stream)?;
        owned_task::enqueue(
            &stream,
            Reduce {
                dst: dst as usize,
                src: src as usize,
                count,
                element,
                op,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reduce<T: Copy>(dst: &mut [T], src: &[T], element: Element, op: Op) {
        let job = Box::new(Reduce {
            dst: dst.as_mut_ptr() as usize,
            src: src.as_ptr() as usize,
            count: std::mem::size_of_val(dst),
            element,
            op,
        });
        job.run();
    }

    #[test]
    fn each_kind_and_type_reduces_element_by_element() {
        let mut d = [1.0f32, 5.0, -2.0];
        reduce(&mut d, &[1.5, 2.0, -3.0], Element::F32, Op::Sum);
        assert_eq!(d, [2.5, 7.0, -5.0]);
        let mut d = [1i8, 100, -128];
        reduce(&mut d, &[2, 100, -1], Element::I8, Op::Sum);
        assert_eq!(d, [3, -56, 127], "sums wrap");
        let mut d = [3i32, -7];
        reduce(&mut d, &[4, -9], Element::I32, Op::Max);
        assert_eq!(d, [4, -7]);
        let mut d = [3u32, u32::MAX];
        reduce(&mut d, &[4, 1], Element::U32, Op::Min);
        assert_eq!(d, [3, 1]);
        let mut d = [half::f32_to_f16(1.0), half::f32_to_f16(2.0)];
        reduce(
            &mut d,
            &[half::f32_to_f16(0.5), half::f32_to_f16(-4.0)],
            Element::F16,
            Op::Sum,
        );
        assert_eq!(d, [half::f32_to_f16(1.5), half::f32_to_f16(-2.0)]);
        let mut d = [half::f32_to_bf16(1.0), half::f32_to_bf16(8.0)];
        reduce(
            &mut d,
            &[half::f32_to_bf16(2.0), half::f32_to_bf16(-1.0)],
            Element::Bf16,
            Op::Min,
        );
        assert_eq!(d, [half::f32_to_bf16(1.0), half::f32_to_bf16(-1.0)]);
    }
}
