//! The 16-bit floats of CANN's data types: IEEE half precision
//! (`ACL_FLOAT16`, `aclFloat16`) and bfloat16 (`ACL_BF16`), to and from
//! `f32`, rounded to nearest even as the device's conversions round.

/// `value` as IEEE half precision, rounded to nearest even.
pub fn f32_to_f16(value: f32) -> u16 {
    let bits = value.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xFF) as i32;
    let man = bits & 0x7F_FFFF;
    if exp == 0xFF {
        // Infinity stays infinity; NaN stays a (quiet) NaN.
        return sign | 0x7C00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1F {
        return sign | 0x7C00;
    }
    let (shift, full) = if e <= 0 {
        // Subnormal (or zero): the implicit bit joins the mantissa.
        if e < -10 {
            return sign;
        }
        ((14 - e) as u32, man | 0x80_0000)
    } else {
        (13, man)
    };
    let mut half = (full >> shift) as u16;
    let rest = full & ((1 << shift) - 1);
    let halfway = 1 << (shift - 1);
    if rest > halfway || (rest == halfway && half & 1 == 1) {
        half += 1; // a carry into the exponent is still the right value
    }
    let exp_bits = if e <= 0 { 0 } else { (e as u16) << 10 };
    sign | (exp_bits + half)
}

/// The float a half-precision value stands for (exactly).
pub fn f16_to_f32(value: u16) -> f32 {
    let sign = if value & 0x8000 != 0 { -1.0f32 } else { 1.0 };
    let exp = i32::from((value >> 10) & 0x1F);
    let man = f32::from(value & 0x3FF);
    sign * match exp {
        0 => man * 2f32.powi(-24),
        0x1F if man == 0.0 => f32::INFINITY,
        0x1F => f32::NAN,
        _ => (1.0 + man / 1024.0) * 2f32.powi(exp - 15),
    }
}

/// `value` as bfloat16 (the top half of its bits), rounded to nearest even.
pub fn f32_to_bf16(value: f32) -> u16 {
    let bits = value.to_bits();
    if value.is_nan() {
        // Quiet, whatever the dropped bits held.
        return ((bits >> 16) as u16) | 0x40;
    }
    let round = 0x7FFF + ((bits >> 16) & 1);
    (bits.wrapping_add(round) >> 16) as u16
}

/// The float a bfloat16 value stands for (exactly).
pub fn bf16_to_f32(value: u16) -> f32 {
    f32::from_bits(u32::from(value) << 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_round_to_nearest_even_and_keep_what_they_can() {
        assert_eq!(f32_to_f16(1.0), 0x3C00);
        assert_eq!(f16_to_f32(0x4000), 2.0);
        assert_eq!(f32_to_bf16(1.0), 0x3F80);
        assert_eq!(bf16_to_f32(0x4000), 2.0);
        // 1 + 2^-8 is halfway between two bf16 values: to the even one, 1.
        assert_eq!(f32_to_bf16(1.0 + 2f32.powi(-8)), 0x3F80);
        // 1 + 3 * 2^-8 is halfway too: to the even one above.
        assert_eq!(f32_to_bf16(1.0 + 3.0 * 2f32.powi(-8)), 0x3F82);
        assert!(bf16_to_f32(f32_to_bf16(f32::NAN)).is_nan());
        assert_eq!(f32_to_bf16(f32::INFINITY), 0x7F80);
        assert_eq!(f32_to_f16(1e6), 0x7C00);
    }
}
