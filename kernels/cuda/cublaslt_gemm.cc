// cuBLASLt behind the accelerator's row-major GEMM. cuBLASLt is column-major: the row-major
// c[m, n] = op(a) op(b) is the column-major c^T[n, m] = op(b)^T op(a)^T, so b goes first and each
// stored row-major matrix is read as its column-major transpose. The heuristic's choice is kept
// per shape, types and strides.
#include "kernels/cuda/cublaslt_gemm.h"

#include <cublasLt.h>
#include <dlfcn.h>

#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>

#include "common/error.h"
#include "kernels/cuda/cuda_check.h"

namespace ds::kernels::cuda {
namespace {

// The cuBLASLt entry points this file calls, looked up in the library once.
struct CublasLtApi {
  decltype(&cublasLtCreate) create;
  decltype(&cublasLtGetStatusString) statusString;
  decltype(&cublasLtMatmulDescCreate) descCreate;
  decltype(&cublasLtMatmulDescDestroy) descDestroy;
  decltype(&cublasLtMatmulDescSetAttribute) descSetAttribute;
  decltype(&cublasLtMatrixLayoutCreate) layoutCreate;
  decltype(&cublasLtMatrixLayoutDestroy) layoutDestroy;
  decltype(&cublasLtMatmulPreferenceCreate) preferenceCreate;
  decltype(&cublasLtMatmulPreferenceDestroy) preferenceDestroy;
  decltype(&cublasLtMatmulPreferenceSetAttribute) preferenceSetAttribute;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic;
  decltype(&cublasLtMatmul) matmul;
};

const std::string kLibrary = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);

CublasLtApi loadCublasLt() {
  std::string tried;
  auto open = [&](const std::string& name) {
    void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) tried += (tried.empty() ? "" : ", ") + name + " (" + dlerror() + ")";
    return handle;
  };
  void* lib = open(kLibrary);
#if defined(DS_CUDA_LIBRARY_DIR)
  // The toolkit this was built against, where the loader's search path lacks it.
  if (!lib) lib = open(std::string(DS_CUDA_LIBRARY_DIR) + "/" + kLibrary);
#endif
  if (!lib)
    throw Error("cuda gemm: cannot load cuBLASLt: tried " + tried +
                "; add the CUDA toolkit's library folder to LD_LIBRARY_PATH");
  auto symbol = [&](const char* name) {
    void* f = dlsym(lib, name);
    if (!f) throw Error("cuda gemm: " + kLibrary + " has no " + name + " (an older cuBLAS?)");
    return f;
  };
  const auto bind = [&](auto& function, const char* name) {
    function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(symbol(name));
  };
  CublasLtApi api;
  bind(api.create, "cublasLtCreate");
  bind(api.statusString, "cublasLtGetStatusString");
  bind(api.descCreate, "cublasLtMatmulDescCreate");
  bind(api.descDestroy, "cublasLtMatmulDescDestroy");
  bind(api.descSetAttribute, "cublasLtMatmulDescSetAttribute");
  bind(api.layoutCreate, "cublasLtMatrixLayoutCreate");
  bind(api.layoutDestroy, "cublasLtMatrixLayoutDestroy");
  bind(api.preferenceCreate, "cublasLtMatmulPreferenceCreate");
  bind(api.preferenceDestroy, "cublasLtMatmulPreferenceDestroy");
  bind(api.preferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute");
  bind(api.heuristic, "cublasLtMatmulAlgoGetHeuristic");
  bind(api.matmul, "cublasLtMatmul");
  return api;
}

const CublasLtApi& api() {
  static const CublasLtApi loaded = loadCublasLt();
  return loaded;
}

void check(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string("cuda gemm: ") + call + ": " + api().statusString(status));
}

constexpr size_t kWorkspaceBytes = 32u << 20;  // cuBLAS's own default on Hopper

struct ShapeKey {
  int device;
  size_t m, n, k, lda, ldb, ldc;
  DType ab, c;
  Transpose ta, tb;
  bool beta;
  auto tie() const { return std::tie(device, m, n, k, lda, ldb, ldc, ab, c, ta, tb, beta); }
  bool operator<(const ShapeKey& o) const { return tie() < o.tie(); }
};

// Process-wide state: a handle per device, a workspace per (device, stream), the chosen algorithms.
struct GemmState {
  std::mutex mutex;
  std::map<int, cublasLtHandle_t> handles;
  std::map<std::pair<int, cudaStream_t>, void*> workspaces;
  std::map<ShapeKey, cublasLtMatmulAlgo_t> algorithms;
};

GemmState& state() {
  static GemmState* s = new GemmState;  // never destroyed: streams may be forgotten at exit
  return *s;
}

cudaDataType_t cudaType(DType type) { return type == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F; }

// RAII for the descriptors of one call.
struct Descriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  ~Descriptors() {
    if (a) api().layoutDestroy(a);
    if (b) api().layoutDestroy(b);
    if (c) api().layoutDestroy(c);
    if (op) api().descDestroy(op);
  }
};

}  // namespace

void cublasLtGemm(size_t m, size_t n, size_t k, float alpha, const GemmInput& a, const GemmInput& b,
                  float beta, const GemmOutput& c, cudaStream_t stream) {
  checkGemmTypes(a, b, c);
  if (m == 0 || n == 0) return;
  if (k == 0) throw Error("cuda gemm: k = 0 (an empty product) is not supported");
  const CublasLtApi& lt = api();
  int device = 0;
  DS_CUDA_CHECK(cudaGetDevice(&device));

  GemmState& s = state();
  cublasLtHandle_t handle;
  void* workspace;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    auto& h = s.handles[device];
    if (!h) check(lt.create(&h), "cublasLtCreate");
    handle = h;
    auto& w = s.workspaces[{device, stream}];
    if (!w) DS_CUDA_CHECK(cudaMalloc(&w, kWorkspaceBytes));
    workspace = w;
  }

  // Column-major view: A' = b (n x k after its op), B' = a (k x m after its op), C' = c (n x m).
  const cublasOperation_t opA = b.op == Transpose::Yes ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opB = a.op == Transpose::Yes ? CUBLAS_OP_T : CUBLAS_OP_N;
  Descriptors d;
  check(lt.descCreate(&d.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  check(lt.descSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof opA), "TRANSA");
  check(lt.descSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof opB), "TRANSB");
  const cudaDataType_t ab = cudaType(a.type), ct = cudaType(c.type);
  // Stored (before the op) column-major shapes: rows x cols with leading dimension ld.
  check(opA == CUBLAS_OP_N ? lt.layoutCreate(&d.a, ab, n, k, static_cast<int64_t>(b.ld))
                           : lt.layoutCreate(&d.a, ab, k, n, static_cast<int64_t>(b.ld)),
        "cublasLtMatrixLayoutCreate(b)");
  check(opB == CUBLAS_OP_N ? lt.layoutCreate(&d.b, ab, k, m, static_cast<int64_t>(a.ld))
                           : lt.layoutCreate(&d.b, ab, m, k, static_cast<int64_t>(a.ld)),
        "cublasLtMatrixLayoutCreate(a)");
  check(lt.layoutCreate(&d.c, ct, n, m, static_cast<int64_t>(c.ld)),
        "cublasLtMatrixLayoutCreate(c)");

  const ShapeKey key{device, m, n, k, a.ld, b.ld, c.ld, a.type, c.type, a.op, b.op, beta != 0.0f};
  cublasLtMatmulAlgo_t algo;
  bool known = false;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.algorithms.find(key);
    if (it != s.algorithms.end()) {
      algo = it->second;
      known = true;
    }
  }
  if (!known) {
    cublasLtMatmulPreference_t preference = nullptr;
    check(lt.preferenceCreate(&preference), "cublasLtMatmulPreferenceCreate");
    const size_t bytes = kWorkspaceBytes;
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t status = lt.preferenceSetAttribute(
        preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes, sizeof bytes);
    if (status == CUBLAS_STATUS_SUCCESS)
      status = lt.heuristic(handle, d.op, d.a, d.b, d.c, d.c, preference, 1, &result, &found);
    lt.preferenceDestroy(preference);
    check(status, "cublasLtMatmulAlgoGetHeuristic");
    if (found == 0)
      throw Error("cuda gemm: cuBLASLt has no algorithm for m=" + std::to_string(m) +
                  " n=" + std::to_string(n) + " k=" + std::to_string(k) + " (" + dtypeName(a.type) +
                  " -> " + dtypeName(c.type) + ", lda=" + std::to_string(a.ld) +
                  " ldb=" + std::to_string(b.ld) + " ldc=" + std::to_string(c.ld) + ")");
    algo = result.algo;
    std::lock_guard<std::mutex> lock(s.mutex);
    s.algorithms.emplace(key, algo);
  }
  check(lt.matmul(handle, d.op, &alpha, b.data, d.a, a.data, d.b, &beta, c.data, d.c, c.data, d.c,
                  &algo, workspace, kWorkspaceBytes, stream),
        "cublasLtMatmul");
}

void forgetGemmStream(cudaStream_t stream) noexcept {
  GemmState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  for (auto it = s.workspaces.begin(); it != s.workspaces.end();) {
    if (it->first.second == stream) {
      cudaFree(it->second);
      it = s.workspaces.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace ds::kernels::cuda
