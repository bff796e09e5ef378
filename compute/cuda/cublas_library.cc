#include "compute/cuda/cublas_library.h"

#include <dlfcn.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#ifndef FERRY_CUBLAS_DIR
#define FERRY_CUBLAS_DIR ""
#endif

namespace ferry {
namespace {

absl::StatusOr<CublasLibrary> Open() {
  const std::string soname = absl::StrCat("libcublas.so.", CUBLAS_VER_MAJOR);
  std::vector<std::string> candidates = {soname};
  if (std::string(FERRY_CUBLAS_DIR).size() > 0) {
    candidates.push_back(absl::StrCat(FERRY_CUBLAS_DIR, "/", soname));
  }
  std::vector<std::string> errors;
  for (const std::string& path : candidates) {
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* error = dlerror();
      errors.push_back(error != nullptr ? error : path);
      continue;
    }
    // Never closed: the backends hold handles into it until exit.
    CublasLibrary lib;
    lib.path = path;
    std::vector<std::string> missing;
    const auto resolve = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(
          dlsym(handle, name));
      if (fn == nullptr) missing.push_back(name);
    };
    resolve(lib.create, "cublasCreate_v2");
    resolve(lib.destroy, "cublasDestroy_v2");
    resolve(lib.set_stream, "cublasSetStream_v2");
    resolve(lib.set_math_mode, "cublasSetMathMode");
    resolve(lib.set_pointer_mode, "cublasSetPointerMode_v2");
    resolve(lib.sgemm, "cublasSgemm_v2");
    resolve(lib.status_string, "cublasGetStatusString");
    if (missing.empty()) return lib;
    errors.push_back(
        absl::StrCat(path, " lacks ", absl::StrJoin(missing, ", ")));
  }
  return absl::UnavailableError(absl::StrCat(
      "cannot load cuBLAS (", absl::StrJoin(errors, "; "),
      "): install the CUDA Toolkit's cuBLAS or put its directory on "
      "LD_LIBRARY_PATH"));
}

}  // namespace

absl::StatusOr<const CublasLibrary*> LoadCublas() {
  // Function-local static: initialized once, thread-safe.
  static const absl::StatusOr<CublasLibrary>* const library =
      new absl::StatusOr<CublasLibrary>(Open());
  if (!library->ok()) return library->status();
  return &**library;
}

}  // namespace ferry
