// cuBLAS, opened with dlopen when the first CUDA backend is created instead
// of linked. Linking it maps libcublas and libcublasLt into every ferry
// process at start: about 135 MiB resident each on CUDA 13 (their relocated
// data), even with no GPU, in CPU-only workers, shards and coordinators that
// never call it (the PS worker's memory budget: <= 2.5x its model,
// docs/benchmarks.md).
//
// The functions are the ones the CUDA backend calls, with cuBLAS's own
// types (cublas_v2.h: the _v2 entry points its macros name).
#ifndef FERRY_COMPUTE_CUDA_CUBLAS_LIBRARY_H_
#define FERRY_COMPUTE_CUDA_CUBLAS_LIBRARY_H_

#include <cublas_v2.h>

#include <string>

#include "absl/status/statusor.h"

namespace ferry {

struct CublasLibrary {
  std::string path;  // what dlopen opened
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasSetPointerMode_v2) set_pointer_mode = nullptr;
  decltype(&cublasSgemm_v2) sgemm = nullptr;
  decltype(&cublasGetStatusString) status_string = nullptr;
};

// Opens libcublas.so.<the major version of the headers built against> from
// the loader's search path (LD_LIBRARY_PATH, ldconfig), else from the CUDA
// Toolkit's library directory of the build, and resolves every function,
// once per process (thread-safe; later calls return the same library or
// error). UNAVAILABLE naming each path tried and dlerror() when no such
// library opens or one lacks a function.
absl::StatusOr<const CublasLibrary*> LoadCublas();

}  // namespace ferry

#endif  // FERRY_COMPUTE_CUDA_CUBLAS_LIBRARY_H_
