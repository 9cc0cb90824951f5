// The guarded CPU backend (kernels/cpu/guarded_accelerator.h): its kernels give the CPU backend's
// bits over device memory the host cannot read; a host read of device memory kills the process
// with a message naming it; a host pointer where device memory belongs, or a copy of the wrong
// kind, is a ds::Error naming the call; concurrent calls never see the arena closed under them;
// released memory is reused.
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "kernels/accelerator.h"
#include "kernels/cpu/cpu_accelerator.h"
#include "kernels/cpu/guarded_accelerator.h"
#include "kernels/cpu/half_convert.h"
#include "test/float_arrays.h"

using ds::DType;
using ds::kernels::Accelerator;
using ds::kernels::AdamStepConstants;
using ds::kernels::AttentionDropout;
using ds::kernels::AttentionShape;
using ds::kernels::CopyKind;
using ds::kernels::cpuAccelerator;
using ds::kernels::DeviceBuffer;
using ds::kernels::GemmInput;
using ds::kernels::GemmOutput;
using ds::kernels::guardedCpuAccelerator;
using ds::kernels::HalfCopy;
using ds::kernels::HalfFormat;
using ds::kernels::Transpose;
using ds::test::bitwiseEqual;
using ds::test::randoms;

namespace {

template <class T>
DeviceBuffer toDevice(Accelerator& acc, const std::vector<T>& host) {
  DeviceBuffer device(acc, host.size() * sizeof(T));
  acc.copy(device.data(), host.data(), device.bytes(), CopyKind::HostToDevice, {});
  return device;
}

template <class T>
std::vector<T> toHost(Accelerator& acc, const DeviceBuffer& device) {
  std::vector<T> host(device.bytes() / sizeof(T));
  acc.copy(host.data(), device.data(), device.bytes(), CopyKind::DeviceToHost, {});
  return host;
}

// Whether the process may read p now, asked of the kernel (write(2) from an unreadable address
// fails with EFAULT) so that the answer "no" costs no signal.
bool hostReadable(const void* p) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const ssize_t written = write(fds[1], p, 1);
  const int error = errno;
  close(fds[0]);
  close(fds[1]);
  if (written != 1) REQUIRE(error == EFAULT);
  return written == 1;
}

// How a forked child running `body` ended, and what it wrote to stderr (its stdout, where Catch2
// would report a fatal signal as a failure of this process's test, goes to /dev/null).
struct ChildExit {
  int status = 0;
  std::string stderrText;
};

ChildExit runChild(const std::function<void()>& body) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    alarm(10);  // a hang shows as SIGALRM, not as a stuck test run
    dup2(fds[1], STDERR_FILENO);
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, STDOUT_FILENO);
    close(fds[0]);
    try {
      body();
    } catch (...) {
      _exit(3);  // never back into the test runner: the parent runs the tests
    }
    _exit(0);
  }
  close(fds[1]);
  ChildExit exit;
  char chunk[4096];
  pollfd pfd{fds[0], POLLIN, 0};
  bool ended = false;  // stderr closed: the child is gone or going
  while (!ended && poll(&pfd, 1, 10000) > 0) {
    const ssize_t n = read(fds[0], chunk, sizeof chunk);
    ended = n <= 0;
    if (n > 0) exit.stderrText.append(chunk, static_cast<size_t>(n));
  }
  close(fds[0]);
  if (!ended) kill(child, SIGKILL);  // silent for 10 s: stuck
  REQUIRE(waitpid(child, &exit.status, 0) == child);
  return exit;
}

}  // namespace

TEST_CASE("guarded accelerator computes the cpu backend's bits over device memory",
          "[accelerator][guarded]") {
  Accelerator& g = guardedCpuAccelerator();
  Accelerator& cpu = cpuAccelerator();
  CHECK(g.kind() == ds::kernels::DeviceKind::Cpu);
  CHECK_FALSE(g.hostAccessible());
  CHECK(g.deviceName().rfind("guarded cpu (", 0) == 0);
  CHECK(std::string(g.communicationBackend()) == "gloo");

  SECTION("layerNormForward") {
    const size_t rows = 7, dim = 37;
    const auto x = randoms(rows * dim, 1), w = randoms(dim, 2), b = randoms(dim, 3);
    std::vector<float> out(rows * dim), mean(rows), rstd(rows);
    cpu.transformerKernels().layerNormForward(out.data(), mean.data(), rstd.data(), x.data(),
                                              w.data(), b.data(), rows, dim, 1e-5f);
    DeviceBuffer dx = toDevice(g, x), dw = toDevice(g, w), db = toDevice(g, b);
    DeviceBuffer dOut(g, out.size() * 4), dMean(g, rows * 4), dRstd(g, rows * 4);
    g.transformerKernels().layerNormForward(dOut.data<float>(), dMean.data<float>(),
                                            dRstd.data<float>(), dx.data<float>(), dw.data<float>(),
                                            db.data<float>(), rows, dim, 1e-5f);
    CHECK(bitwiseEqual(toHost<float>(g, dOut), out));
    CHECK(bitwiseEqual(toHost<float>(g, dMean), mean));
    CHECK(bitwiseEqual(toHost<float>(g, dRstd), rstd));
    CHECK_FALSE(hostReadable(dOut.data()));  // closed again after the calls
  }

  SECTION("gemm, b transposed, beta 0.5") {
    const size_t m = 5, n = 7, k = 9;
    const auto a = randoms(m * k, 4), b = randoms(n * k, 5), c0 = randoms(m * n, 6);
    std::vector<float> c = c0;
    cpu.gemm(m, n, k, 1.5f, {a.data(), DType::F32, k, Transpose::No},
             {b.data(), DType::F32, k, Transpose::Yes}, 0.5f, {c.data(), DType::F32, n}, {});
    DeviceBuffer da = toDevice(g, a), dbm = toDevice(g, b), dc = toDevice(g, c0);
    g.gemm(m, n, k, 1.5f, {da.data(), DType::F32, k, Transpose::No},
           {dbm.data(), DType::F32, k, Transpose::Yes}, 0.5f, {dc.data(), DType::F32, n}, {});
    CHECK(bitwiseEqual(toHost<float>(g, dc), c));
  }

  SECTION("attention forward with dropout, and backward") {
    AttentionShape s{2, 9, 2, 1, 8, 100};
    const auto qkv = randoms(s.samples * s.seq * s.qkvStride(), 7);
    const auto dCtx = randoms(s.samples * s.seq * s.ctxStride(), 8);
    const std::vector<uint64_t> bases = {11, 12};  // host memory, by the contract
    const AttentionDropout dropout{static_cast<uint32_t>(0.1 * (1 << 24)), 1.0f / 0.9f,
                                   bases.data(), 0};
    std::vector<float> ctx(dCtx.size()), stats(s.statsSize()), dqkv(qkv.size());
    cpu.attentionForward(s, qkv.data(), ctx.data(), stats.data(), &dropout);
    cpu.attentionBackward(s, qkv.data(), ctx.data(), stats.data(), dCtx.data(), dqkv.data(),
                          &dropout);
    DeviceBuffer dQkv = toDevice(g, qkv), dDctx = toDevice(g, dCtx);
    DeviceBuffer dCtxOut(g, ctx.size() * 4), dStats(g, stats.size() * 4), dDqkv(g, qkv.size() * 4);
    g.attentionForward(s, dQkv.data<float>(), dCtxOut.data<float>(), dStats.data<float>(),
                       &dropout);
    g.attentionBackward(s, dQkv.data<float>(), dCtxOut.data<float>(), dStats.data<float>(),
                        dDctx.data<float>(), dDqkv.data<float>(), &dropout);
    CHECK(bitwiseEqual(toHost<float>(g, dCtxOut), ctx));
    CHECK(bitwiseEqual(toHost<float>(g, dStats), stats));
    CHECK(bitwiseEqual(toHost<float>(g, dDqkv), dqkv));
  }

  SECTION("adamStep with a bf16 copy") {
    const size_t count = 1001;
    const AdamStepConstants c =
        ds::kernels::adamStepConstants(1e-3, 0.9, 0.999, 1e-8, 0.01, true, 3);
    auto params = randoms(count, 9), m = randoms(count, 10, 0.1f), v = randoms(count, 11, 0.1f);
    for (float& x : v) x = x * x;
    const auto grads = randoms(count, 12);
    DeviceBuffer dp = toDevice(g, params), dg = toDevice(g, grads), dm = toDevice(g, m),
                 dv = toDevice(g, v), dHalf(g, count * 2);
    std::vector<uint16_t> half(count);
    cpu.adamStep(params.data(), grads.data(), m.data(), v.data(), count, c,
                 {half.data(), HalfFormat::Bf16}, {});
    g.adamStep(dp.data<float>(), dg.data<float>(), dm.data<float>(), dv.data<float>(), count, c,
               {dHalf.data<uint16_t>(), HalfFormat::Bf16}, {});
    CHECK(bitwiseEqual(toHost<float>(g, dp), params));
    CHECK(bitwiseEqual(toHost<float>(g, dm), m));
    CHECK(bitwiseEqual(toHost<float>(g, dv), v));
    CHECK(toHost<uint16_t>(g, dHalf) == half);
  }

  SECTION("unscaleGradients: fp16 with an infinity sets the flag, fp32 finite does not") {
    std::vector<uint16_t> in(300);
    const auto values = randoms(in.size(), 13, 100.0f);
    for (size_t i = 0; i < in.size(); ++i) in[i] = ds::kernels::floatToFp16(values[i]);
    in[17] = 0x7C00;  // +inf
    std::vector<float> out(in.size());
    uint32_t overflow = 0;
    cpu.unscaleGradients(in.data(), DType::F16, out.data(), in.size(), 0.25f, &overflow, {});
    DeviceBuffer dIn = toDevice(g, in), dOut(g, out.size() * 4),
                 dFlag = toDevice(g, std::vector<uint32_t>{0});
    g.unscaleGradients(dIn.data(), DType::F16, dOut.data<float>(), in.size(), 0.25f,
                       dFlag.data<uint32_t>(), {});
    CHECK(bitwiseEqual(toHost<float>(g, dOut), out));
    CHECK(overflow == 1);
    CHECK(toHost<uint32_t>(g, dFlag) == std::vector<uint32_t>{1});

    DeviceBuffer dF32 = toDevice(g, values), dFlag2 = toDevice(g, std::vector<uint32_t>{0});
    g.unscaleGradients(dF32.data(), DType::F32, dF32.data<float>(), values.size(), 0.5f,
                       dFlag2.data<uint32_t>(), {});
    CHECK(toHost<uint32_t>(g, dFlag2) == std::vector<uint32_t>{0});
    std::vector<float> halved = values;
    for (float& x : halved) x *= 0.5f;
    CHECK(bitwiseEqual(toHost<float>(g, dF32), halved));
  }
}

TEST_CASE("guarded accelerator kills a host read of device memory", "[accelerator][guarded]") {
  Accelerator& g = guardedCpuAccelerator();
  const ChildExit exit = runChild([&] {
    auto* device = static_cast<volatile float*>(g.allocate(64));
    const float value = device[3];  // the read under test: must not return
    (void)value;
  });
  INFO("child stderr: " << exit.stderrText);
  REQUIRE(WIFSIGNALED(exit.status));
  CHECK(WTERMSIG(exit.status) == SIGSEGV);
  CHECK_THAT(exit.stderrText, Catch::Contains("host code touched device memory at 0x") &&
                                  Catch::Contains("(outside any accelerator call)"));

  // The parent is unharmed: its arena is still closed to the host, and still works through calls.
  const std::vector<float> values = randoms(100, 14);
  DeviceBuffer device = toDevice(g, values);
  CHECK_FALSE(hostReadable(device.data()));
  const std::vector<float> back = toHost<float>(g, device);
  CHECK(hostReadable(back.data()));
  CHECK(bitwiseEqual(back, values));
}

TEST_CASE("guarded accelerator hands other segmentation faults on", "[accelerator][guarded]") {
  Accelerator& g = guardedCpuAccelerator();
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* elsewhere = mmap(nullptr, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(elsewhere != MAP_FAILED);
  const ChildExit exit = runChild([&] {
    g.release(g.allocate(1));  // puts the guard's handler in front of Catch2's
    const float value = *static_cast<volatile float*>(elsewhere);
    (void)value;
  });
  munmap(elsewhere, page);
  INFO("child stderr: " << exit.stderrText);
  REQUIRE(WIFSIGNALED(exit.status));
  CHECK(WTERMSIG(exit.status) == SIGSEGV);  // not a loop between the handlers, not ignored
  CHECK_THAT(exit.stderrText, !Catch::Contains("guarded accelerator"));
}

TEST_CASE("guarded accelerator refuses host pointers where device memory belongs",
          "[accelerator][guarded]") {
  Accelerator& g = guardedCpuAccelerator();
  const size_t n = 16;
  std::vector<float> host(n, 1.0f), host2(n);
  DeviceBuffer device(g, n * 4), device2(g, n * 4);
  float* d = device.data<float>();
  void* released = g.allocate(n * 4);
  g.release(released);
  const auto& k = g.transformerKernels();

  struct Case {
    const char* what;
    std::function<void()> call;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"table kernel, host input",
       [&] { k.layerNormForward(d, d, d, host.data(), d, d, 1, n, 1e-5f); },
       "guarded accelerator: layerNormForward's argument 4 is not device memory (host address 0x"},
      {"table kernel, host output", [&] { k.add(host.data(), d, n); },
       "add's argument 1 is not device memory"},
      {"table kernel, released memory", [&] { k.add(d, static_cast<float*>(released), n); },
       "add's argument 2 (0x"},
      {"gemm, host a",
       [&] {
         g.gemm(2, 2, 2, 1.0f, {host.data(), DType::F32, 2, Transpose::No},
                {d, DType::F32, 2, Transpose::No}, 0.0f, {d, DType::F32, 2}, {});
       },
       "gemm's argument 5 (a.data) is not device memory"},
      {"gemm, c past its allocation",
       [&] {
         g.gemm(8, 8, 1, 1.0f, {d, DType::F32, 1, Transpose::No}, {d, DType::F32, 8, Transpose::No},
                0.0f, {d, DType::F32, 8}, {});
       },
       "gemm's argument 8 (c.data): 256 bytes"},
      {"copy HostToDevice from device memory",
       [&] { g.copy(d, device2.data(), n * 4, CopyKind::HostToDevice, {}); },
       "copy's argument 2 (src) is device memory"},
      {"copy HostToDevice to host memory",
       [&] { g.copy(host2.data(), host.data(), n * 4, CopyKind::HostToDevice, {}); },
       "copy's argument 1 (dst) is not device memory"},
      {"copy DeviceToHost into device memory",
       [&] { g.copy(device2.data(), d, n * 4, CopyKind::DeviceToHost, {}); },
       "copy's argument 1 (dst) is device memory (0x"},
      {"copy DeviceToDevice from host memory",
       [&] { g.copy(d, host.data(), n * 4, CopyKind::DeviceToDevice, {}); },
       "copy's argument 2 (src) is not device memory"},
      {"copy past the end", [&] { g.copy(host.data(), d + 1, n * 4, CopyKind::DeviceToHost, {}); },
       "run past the end of its device allocation (64 bytes"},
      {"copyRows, host rows as device",
       [&] { g.copyRows(host2.data(), 8, d, 8, 4, 2, CopyKind::DeviceToDevice, {}); },
       "copyRows's argument 1 (dst) is not device memory"},
      {"fillZero of host memory", [&] { g.fillZero(host.data(), 4, {}); },
       "fillZero's argument 1 (device) is not device memory"},
      {"adamStep, host m",
       [&] { g.adamStep(d, d, host.data(), d, n, AdamStepConstants{}, HalfCopy{}, {}); },
       "adamStep's argument 3 (m) is not device memory"},
      {"unscaleGradients, host overflow flag",
       [&] {
         uint32_t flag = 0;
         g.unscaleGradients(d, DType::F32, d, n, 1.0f, &flag, {});
       },
       "unscaleGradients's argument 6 (overflow) is not device memory"},
      {"attentionForward, host ctx",
       [&] {
         g.attentionForward({1, 2, 1, 1, 2, 2}, d, host.data(), d, nullptr);
       },
       "attentionForward's argument 3 (ctx) is not device memory"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    CHECK_THROWS_AS(c.call(), ds::Error);
    CHECK_THROWS_WITH(c.call(), Catch::Contains(c.expected));
  }

  // Null where the contract allows it, and a copy of the right kinds, pass.
  std::vector<int32_t> ids = {0, 0};
  DeviceBuffer dIds = toDevice(g, ids), table = toDevice(g, randoms(n, 15));
  CHECK_NOTHROW(k.embeddingForward(d, dIds.data<int32_t>(), table.data<float>(), nullptr, 2, 2, 4));
  CHECK_NOTHROW(g.copyRows(device2.data(), 8, d, 16, 8, 4, CopyKind::DeviceToDevice, {}));
  CHECK_NOTHROW(g.copyRows(host2.data(), 8, d, 16, 8, 4, CopyKind::DeviceToHost, {}));
  CHECK_NOTHROW(g.adamStep(d, d, d, d, n, AdamStepConstants{}, HalfCopy{}, {}));
}

TEST_CASE("guarded accelerator table kernels run from several threads at once",
          "[accelerator][guarded]") {
  Accelerator& g = guardedCpuAccelerator();
  const auto& k = g.transformerKernels();
  const size_t rows = 4, dim = 65, iterations = 200;
  const auto x = randoms(rows * dim, 16), w = randoms(dim, 17), b = randoms(dim, 18);
  std::vector<float> expected(rows * dim), mean(rows), rstd(rows);
  cpuAccelerator().transformerKernels().layerNormForward(
      expected.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), rows, dim, 1e-5f);
  std::vector<float> doubled = expected;
  cpuAccelerator().transformerKernels().add(doubled.data(), expected.data(), doubled.size());

  for (int threads : {2, 4}) {
    std::atomic<int> wrong{0}, errors{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&] {
        try {
          DeviceBuffer dx = toDevice(g, x), dw = toDevice(g, w), db = toDevice(g, b);
          DeviceBuffer out(g, rows * dim * 4), sum(g, rows * dim * 4), mu(g, rows * 4),
              rs(g, rows * 4);
          for (size_t i = 0; i < iterations; ++i) {
            k.layerNormForward(out.data<float>(), mu.data<float>(), rs.data<float>(),
                               dx.data<float>(), dw.data<float>(), db.data<float>(), rows, dim,
                               1e-5f);
            g.copy(sum.data(), out.data(), out.bytes(), CopyKind::DeviceToDevice, {});
            k.add(sum.data<float>(), out.data<float>(), rows * dim);
            if (!bitwiseEqual(toHost<float>(g, sum), doubled)) ++wrong;
          }
        } catch (const std::exception&) {
          ++errors;
        }
      });
    for (auto& t : pool) t.join();
    INFO(threads << " threads");
    CHECK(errors == 0);
    CHECK(wrong == 0);
  }
}

TEST_CASE("guarded accelerator reuses released memory", "[accelerator][guarded]") {
  Accelerator& g = guardedCpuAccelerator();
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t before = g.memoryInfo().freeBytes;
  CHECK(g.memoryInfo().totalBytes == size_t{64} << 30);

  void* a = g.allocate(3 * page + 1);  // four pages
  CHECK(reinterpret_cast<uintptr_t>(a) % 64 == 0);
  CHECK(g.memoryInfo().freeBytes == before - 4 * page);
  const std::vector<float> values = randoms((3 * page + 1) / 4, 19);
  g.copy(a, values.data(), values.size() * 4, CopyKind::HostToDevice, {});
  g.release(a);
  CHECK(g.memoryInfo().freeBytes == before);

  // First fit: the same pages again, refilled with NaN bytes rather than the old values or zeros.
  void* again = g.allocate(3 * page + 1);
  CHECK(again == a);
  std::vector<uint8_t> bytes(3 * page + 1);
  g.copy(bytes.data(), again, bytes.size(), CopyKind::DeviceToHost, {});
  CHECK(bytes == std::vector<uint8_t>(bytes.size(), 0xFF));
  g.release(again);

  // Zero bytes still give a unique pointer, one page each.
  void* empty1 = g.allocate(0);
  void* empty2 = g.allocate(0);
  CHECK(empty1 != nullptr);
  CHECK(empty2 != nullptr);
  CHECK(empty1 != empty2);
  CHECK(g.memoryInfo().freeBytes == before - 2 * page);
  CHECK_NOTHROW(g.copy(empty1, values.data(), 0, CopyKind::HostToDevice, {}));
  g.release(empty1);
  g.release(empty2);
  g.release(nullptr);
  CHECK(g.memoryInfo().freeBytes == before);

  // Pinned memory is host memory: readable and writable without a call.
  auto* pinned = static_cast<float*>(g.allocatePinned(100));
  CHECK(reinterpret_cast<uintptr_t>(pinned) % 64 == 0);
  pinned[24] = 1.0f;
  CHECK(hostReadable(pinned));
  g.releasePinned(pinned);
}
