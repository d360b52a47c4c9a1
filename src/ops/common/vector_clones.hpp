// ops/common/vector_clones.hpp — runtime dispatch to the machine's vector units (internal to the CPU ops).
//
// hetrain is built for x86-64-v2 (SSE4.2) so that one binary runs on every node of a cluster, whatever the
// login node that built it. A function marked HT_VECTOR_CLONES is compiled three times — for x86-64-v4
// (AVX-512), x86-64-v3 (AVX2 + FMA) and the baseline — and the loader picks the one the CPU it runs on
// supports (GCC target_clones, an ifunc resolved once at start-up). Used for the memory- and
// arithmetic-bound loops of batch norm and the element-wise ops; never for the optimizer update, whose
// rounding every rank must share (docs/cpu-performance.md). Mark small serial kernels, not functions with
// OpenMP regions: the outlined parallel body is a separate function that the clones would not cover.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(HETRAIN_NO_VECTOR_CLONES)
#define HT_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define HT_VECTOR_CLONES
#endif
