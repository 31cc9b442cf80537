// Element-wise addition of IEEE half-precision numbers on the host, for the
// stand-ins of the samples' "add" kernels. The sum of two halves is
// computed in float (exact enough: float's 24-bit significand rounds to
// half's 11 bits without double-rounding error) and rounded to the
// nearest half, ties to even, as the AI Core's vector unit rounds.
#ifndef ACLALLOC_SAMPLES_FP16_ADD_H
#define ACLALLOC_SAMPLES_FP16_ADD_H

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace aclalloc_samples {

inline float HalfToFloat(uint16_t h)
{
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000U) << 16;
    uint32_t exponent = (h >> 10) & 0x1FU;
    uint32_t mantissa = h & 0x3FFU;
    uint32_t bits;
    if (exponent == 0x1FU) {
        bits = sign | 0x7F800000U | (mantissa << 13); // infinity or NaN
    } else if (exponent != 0) {
        bits = sign | ((exponent + 112U) << 23) | (mantissa << 13);
    } else if (mantissa == 0) {
        bits = sign; // zero
    } else {
        // A subnormal half is a normal float: shift the leading one out.
        exponent = 113U;
        while ((mantissa & 0x400U) == 0) {
            mantissa <<= 1;
            --exponent;
        }
        bits = sign | (exponent << 23) | ((mantissa & 0x3FFU) << 13);
    }
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

inline uint16_t FloatToHalf(float f)
{
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000U);
    const uint32_t exponent = (bits >> 23) & 0xFFU;
    uint32_t mantissa = bits & 0x7FFFFFU;
    if (exponent == 0xFFU) {
        return sign | 0x7C00U | (mantissa != 0 ? 0x200U : 0U);
    }
    const int32_t e = static_cast<int32_t>(exponent) - 127 + 15;
    if (e >= 0x1F) {
        return sign | 0x7C00U; // overflow: infinity
    }
    uint32_t shift;
    uint32_t base;
    if (e <= 0) {
        if (e < -10) {
            return sign; // below half the smallest subnormal: zero
        }
        mantissa |= 0x800000U;
        shift = static_cast<uint32_t>(14 - e);
        base = 0;
    } else {
        shift = 13;
        base = static_cast<uint32_t>(e) << 10;
    }
    uint32_t half = base + (mantissa >> shift);
    const uint32_t rest = mantissa & ((1U << shift) - 1U);
    const uint32_t midpoint = 1U << (shift - 1);
    if (rest > midpoint || (rest == midpoint && (half & 1U) != 0)) {
        ++half; // a carry into the exponent is still the right half
    }
    return static_cast<uint16_t>(sign | half);
}

// z[i] = x[i] + y[i] for i in [0, count).
inline void AddHalves(const uint16_t* x, const uint16_t* y, uint16_t* z, size_t count)
{
    for (size_t i = 0; i < count; ++i) {
        z[i] = FloatToHalf(HalfToFloat(x[i]) + HalfToFloat(y[i]));
    }
}

} // namespace aclalloc_samples

#endif
