"""Kernel families fold templates, never cut them (issue #46): the family of a demangled kernel
name is its qualified function name, return type and parameters dropped, template arguments
folded (one configuration name kept), tile shapes as `*` (nsysreport.kernel_family). The names
are real: from the PyTorch profiler and nsys traces in ../shared/traces and the public traces
of AMD-AGI/TraceLens (tests/traces), unless marked."""

from __future__ import annotations

import pytest

from nsysreport.kernel_family import family_of

FAMILIES = [
    # cuBLAS: a return type that is itself a template with parentheses in it.
    (
        "std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, float, float, "
        "float, float, false, true, true, false, 7, cublasGemvParams<cublasGemvTensorStridedBatched"
        "<float const>, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched"
        "<float>, float> >(cublasGemvParams<cublasGemvTensorStridedBatched<float const>, "
        "cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, "
        "float>)",
        "internal::gemvx::kernel",
    ),
    (
        "void gemvNSP_kernel<float, float, float, float, 1, 16, 4, 1024, cublasGemvParams<"
        "cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, "
        "cublasGemvTensorStridedBatched<float>, float> >(cublasGemvParams<"
        "cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, "
        "cublasGemvTensorStridedBatched<float>, float>)",
        "gemvNSP_kernel",
    ),
    (
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_"
        "segment_k_off_kernel__5x_cublas",
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize*_warpgroupsize*_execute_segment_k_off_"
        "kernel__5x_cublas",
    ),
    ("nvjet_tst_192x192_64x4_2x1_v_bz_coopB_bias_TNN", "nvjet_tst_*_*_*_v_bz_coopB_bias_TNN"),
    # CUTLASS 2 names its configuration as the one template argument: kept, tiles folded.
    (
        "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8>("
        "cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8::Params)",
        "cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_*_*_tn_align8>",
    ),
    (
        "void cutlass_cudnn_train::Kernel<cutlass_cudnn_train::reduction::kernel::ReduceSplitK<"
        "cutlass_cudnn_train::MatrixShape<4, 128>, cutlass_cudnn_train::epilogue::thread::"
        "LinearCombination<float, 4, float, float, (cutlass_cudnn_train::epilogue::thread::"
        "ScaleType::Kind)0, (cutlass_cudnn_train::FloatRoundStyle)2>, cutlass_cudnn_train::"
        "reduction::thread::ReduceAdd<float, float, 4>, 4> >(cutlass_cudnn_train::reduction::"
        "kernel::ReduceSplitK<cutlass_cudnn_train::MatrixShape<4, 128>, cutlass_cudnn_train::"
        "epilogue::thread::LinearCombination<float, 4, float, float, (cutlass_cudnn_train::"
        "epilogue::thread::ScaleType::Kind)0, (cutlass_cudnn_train::FloatRoundStyle)2>, "
        "cutlass_cudnn_train::reduction::thread::ReduceAdd<float, float, 4>, 4>::Params)",
        "cutlass_cudnn_train::Kernel<cutlass_cudnn_train::reduction::kernel::ReduceSplitK>",
    ),
    # CUTLASS 3 (made up in its shape): the one argument is a template, kept folded.
    (
        "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, "
        "int, int>, cutlass::gemm::collective::CollectiveMma<cute::C<128>>, void> >(cutlass::"
        "gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int>, void>::Params)",
        "cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal>",
    ),
    # FlashAttention: nested templates of several arguments.
    (
        "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, "
        "128, 4, false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<64, 128, "
        "128, 4, cutlass::bfloat16_t> >, false, false, false, false, false, true, false>("
        "pytorch_flash::Flash_fwd_params)",
        "pytorch_flash::flash_fwd_kernel",
    ),
    # nsys spells casts in template arguments.
    (
        "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<(int)128, (int)64, (int)64, (int)4, "
        "(bool)0, (bool)0, cutlass::half_t>, (bool)1, (bool)0>(flash::Flash_fwd_params)",
        "flash::flash_fwd_kernel",
    ),
    # NCCL: no return type, parameters only.
    (
        "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)",
        "ncclKernel_AllReduce_RING_LL_Sum_float",
    ),
    (
        "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)",
        "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
    ),
    ("triton_poi_fused_addmm_silu_2", "triton_poi_fused_addmm_silu_2"),
    # PyTorch elementwise and reductions: functors and lambdas inside the arguments.
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::AbsFunctor<long>, "
        "std::array<char*, 2ul> >(int, at::native::AbsFunctor<long>, std::array<char*, 2ul>)",
        "at::native::vectorized_elementwise_kernel",
    ),
    (
        "void at::native::reduce_kernel<(int)512, (int)1, at::native::ReduceOp<float, "
        "at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator "
        "()(at::TensorIterator &)::[lambda(float, float) (instance 1)]>, unsigned int, float, "
        "(int)4>>(T3)",
        "at::native::reduce_kernel",
    ),
    (
        "void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, "
        "unsigned int, 2, 2, -2, true>(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, "
        "long)",
        "at::native::(anonymous namespace)::indexSelectLargeIndex",
    ),
    (
        "void at::native::<unnamed>::vectorized_layer_norm_kernel<float, float, (bool)0>(int, T2, "
        "const T1 *, const T1 *, const T1 *, T2 *, T2 *, T1 *)",
        "at::native::<unnamed>::vectorized_layer_norm_kernel",
    ),
    # One type as the argument is folded like any other.
    (
        "void vllm::rms_norm_kernel<c10::BFloat16>(T1 *, const T1 *, const T1 *, float, int, int)",
        "vllm::rms_norm_kernel",
    ),
    # A lambda as the one argument (perlmutter-cloverleaf-cuda.sqlite).
    (
        "void clover::par_reduce_kernel<field_summary(global_variables &, parallel_ &)::"
        "[lambda(int) (instance 1)]>(T1)",
        "clover::par_reduce_kernel",
    ),
    # ROCm: Tensile's plain names, tiles folded.
    (
        "Cijk_Ailk_Bjlk_BBS_BH_Bias_HAS_SAV_UserArgs_MT64x32x64_MI16x16x1_SN_LDSB0_AFC1",
        "Cijk_Ailk_Bjlk_BBS_BH_Bias_HAS_SAV_UserArgs_MT*_MI*_SN_LDSB0_AFC1",
    ),
    # Operator names (made up): their symbols are no brackets.
    ("void Op<float>::operator()<int>(int)", "Op::operator()"),
    ("void ns::Cmp::operator<(ns::Cmp const&) const", "ns::Cmp::operator<"),
    # A name cut short: its brackets do not balance; only the parameters go.
    (
        "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl<",
        "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl<",
    ),
]


@pytest.mark.parametrize(("kernel", "family"), FAMILIES, ids=[f for _, f in FAMILIES])
def test_a_kernel_s_family_is_its_qualified_name_with_templates_folded(
    kernel: str, family: str
) -> None:
    assert family_of(kernel) == family


def test_instantiations_of_one_kernel_are_one_family() -> None:
    names = [
        "void at::native::vectorized_elementwise_kernel<4, at::native::AbsFunctor<long>, "
        "std::array<char*, 2ul> >(int, at::native::AbsFunctor<long>, std::array<char*, 2ul>)",
        "void at::native::vectorized_elementwise_kernel<(int)4, at::native::CUDAFunctor_add<float>,"
        " std::array<char *, (unsigned long)3>>(int, T2, T3)",
    ]
    assert {family_of(n) for n in names} == {"at::native::vectorized_elementwise_kernel"}
