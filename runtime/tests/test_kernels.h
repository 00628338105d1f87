// Hand-written PTX kernels for the [gpu] tests (checked with ptxas for
// sm_90; loaded through the driver's JIT, so any sm_80+ device runs them).
#pragma once

namespace kiln::rt::test {

// kiln_test_axpy(x, y, n, alpha, beta): y[i] = alpha * x[i] + beta.
// kiln_test_scalars(out, n, f, i, l, h, flag): stores each parameter into
//   out at byte offsets 0 (u64), 8 (f32), 12 (s32), 16 (s64), 24 (b16),
//   26 (u8), so a test can see exactly what the packer passed.
// kiln_test_empty(p): does nothing (launch overhead).
inline constexpr const char* kTestPtx = R"(
.version 7.0
.target sm_80
.address_size 64

.visible .entry kiln_test_axpy(
    .param .u64 x,
    .param .u64 y,
    .param .u64 n,
    .param .f32 alpha,
    .param .f32 beta
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<8>;
    .reg .f32 %f<4>;

    ld.param.u64 %rd1, [x];
    ld.param.u64 %rd2, [y];
    ld.param.u64 %rd3, [n];
    ld.param.f32 %f1, [alpha];
    ld.param.f32 %f2, [beta];
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ntid.x;
    mov.u32 %r3, %tid.x;
    mul.wide.u32 %rd4, %r1, %r2;
    cvt.u64.u32 %rd5, %r3;
    add.s64 %rd4, %rd4, %rd5;
    setp.ge.s64 %p1, %rd4, %rd3;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    shl.b64 %rd6, %rd4, 2;
    add.s64 %rd7, %rd1, %rd6;
    ld.global.f32 %f3, [%rd7];
    fma.rn.f32 %f3, %f3, %f1, %f2;
    add.s64 %rd7, %rd2, %rd6;
    st.global.f32 [%rd7], %f3;
DONE:
    ret;
}

.visible .entry kiln_test_scalars(
    .param .u64 out,
    .param .u64 n,
    .param .f32 f,
    .param .s32 i,
    .param .s64 l,
    .param .b16 h,
    .param .u8 flag
)
{
    .reg .b64 %rd<4>;
    .reg .b32 %r<2>;
    .reg .f32 %f<2>;
    .reg .b16 %h<3>;

    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u64 %rd2, [n];
    st.global.u64 [%rd1], %rd2;
    ld.param.f32 %f1, [f];
    st.global.f32 [%rd1+8], %f1;
    ld.param.s32 %r1, [i];
    st.global.s32 [%rd1+12], %r1;
    ld.param.s64 %rd3, [l];
    st.global.s64 [%rd1+16], %rd3;
    ld.param.b16 %h1, [h];
    st.global.b16 [%rd1+24], %h1;
    ld.param.u8 %h2, [flag];
    st.global.u8 [%rd1+26], %h2;
    ret;
}

.visible .entry kiln_test_empty(
    .param .u64 p
)
{
    ret;
}
)";

}  // namespace kiln::rt::test
