// GuardedAccelerator: the CPU backend behind a memory guard (guarded_accelerator.h says why). Three
// parts: the arena (device memory: first-fit pages of one PROT_NONE reservation, readable only
// while a guard is open), the SIGSEGV handler that names a host access to it, and the backend,
// which checks every device pointer and runs the CPU backend's call inside a guard. It does not
// emulate streams (the CPU backend runs everything at the call), and cannot catch a host access
// made while another thread's call holds the arena open.
#include "kernels/cpu/guarded_accelerator.h"

#include <execinfo.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>

#include "common/error.h"
#include "common/memory_budget.h"
#include "kernels/cpu/cpu_accelerator.h"

namespace ds::kernels {
namespace {

constexpr size_t kArenaBytes = size_t{64} << 30;  // address space only (MAP_NORESERVE)
constexpr size_t kPinnedAlignment = 64;
constexpr size_t kHugePage = size_t{2} << 20;  // x86-64's transparent huge page

// What the signal handler reads, as lock-free atomics: where the arena is and how much of it was
// ever handed out.
std::atomic<uintptr_t> gArenaBase{0};
std::atomic<size_t> gHighWater{0};

// ---- The SIGSEGV handler --------------------------------------------------------------------

struct sigaction gDisplaced;         // the handler ours replaced: faults outside the arena
std::atomic<bool> gHandedOn{false};  // a fault was handed to gDisplaced since ours went in

void writeText(const char* text, size_t n) {
  while (n > 0) {
    const ssize_t written = write(STDERR_FILENO, text, n);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return;
    text += written;
    n -= static_cast<size_t>(written);
  }
}

// "0x..." of `value` into out (19 chars at most); returns the length. No snprintf: it is not
// async-signal-safe.
size_t formatHex(uintptr_t value, char* out) {
  char digits[16];
  size_t n = 0;
  do {
    digits[n++] = "0123456789abcdef"[value & 15];
    value >>= 4;
  } while (value != 0);
  out[0] = '0';
  out[1] = 'x';
  for (size_t i = 0; i < n; ++i) out[2 + i] = digits[n - 1 - i];
  return 2 + n;
}

void restoreDefaultSegv() {
  struct sigaction defaults {};
  defaults.sa_handler = SIG_DFL;
  sigemptyset(&defaults.sa_mask);
  sigaction(SIGSEGV, &defaults, nullptr);
}

// Async-signal-safe calls only: write, backtrace (preloaded, see installSegvHandler), sigaction.
void onSegv(int signal, siginfo_t* info, void*) {
  const int savedErrno = errno;
  // si_code > 0: raised by the access itself, so si_addr is the address (kill and raise set none).
  const bool fault = info->si_code > 0;
  const uintptr_t address = reinterpret_cast<uintptr_t>(info->si_addr);
  const uintptr_t base = gArenaBase.load(std::memory_order_relaxed);
  if (fault && base != 0 && address - base < kArenaBytes) {
    const bool allocated = address - base < gHighWater.load(std::memory_order_relaxed);
    const char* head = allocated ? "guarded accelerator: host code touched device memory at "
                                 : "guarded accelerator: code touched device memory at ";
    const char* tail = allocated ? " (outside any accelerator call)\n"
                                 : " (past every allocation: never handed out)\n";
    char hex[20];
    writeText(head, std::strlen(head));
    writeText(hex, formatHex(address, hex));
    writeText(tail, std::strlen(tail));
    void* frames[64];
    backtrace_symbols_fd(frames, backtrace(frames, 64), STDERR_FILENO);
    // Dies of SIGSEGV on return. Not by running the access again: another thread's call may have
    // opened the arena meanwhile, and the access would then succeed. The raised signal, pending
    // while this handler runs, is delivered under the default action before the access reruns.
    restoreDefaultSegv();
    raise(SIGSEGV);
    errno = savedErrno;
    return;
  }
  // Not the arena's: the displaced handler gets it, once. A handler that puts back what it
  // displaced and raises again (Catch2's does) could otherwise hand it back to us forever.
  if (gHandedOn.exchange(true))
    restoreDefaultSegv();
  else
    sigaction(SIGSEGV, &gDisplaced, nullptr);
  if (!fault) raise(signal);  // a sent signal, unlike a fault, does not come again by itself
  errno = savedErrno;
}

// Puts ours in front unless it is there. Called whenever the arena becomes unreadable again:
// test frameworks (Catch2 among them) install their own handler for each test case and restore
// the one they saved afterwards, which may drop ours.
void installSegvHandler() {
  struct sigaction current {};
  if (sigaction(SIGSEGV, nullptr, &current) != 0) return;
  if ((current.sa_flags & SA_SIGINFO) && current.sa_sigaction == onSegv) return;
  // backtrace's first call loads libgcc_s (it allocates): make that call here, not in the handler.
  static const bool preloaded = [] {
    void* frame[1];
    return backtrace(frame, 1) >= 0;
  }();
  (void)preloaded;
  gDisplaced = current;
  gHandedOn.store(false);
  struct sigaction ours {};
  ours.sa_sigaction = onSegv;
  ours.sa_flags = SA_SIGINFO | SA_ONSTACK;  // the alternate stack, where the thread has one
  sigemptyset(&ours.sa_mask);
  sigaction(SIGSEGV, &ours, nullptr);
}

// ---- The arena ------------------------------------------------------------------------------

std::string hexAddress(const void* p) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%zx", reinterpret_cast<uintptr_t>(p));
  return text;
}

const char* copyKindName(CopyKind kind) {
  return kind == CopyKind::HostToDevice   ? "HostToDevice"
         : kind == CopyKind::DeviceToHost ? "DeviceToHost"
                                          : "DeviceToDevice";
}

// A pointer argument, for messages: "copy's argument 2 (src)".
struct Arg {
  const char* call;
  size_t index;                // 1-based, in the method's or kernel's parameter list
  const char* name = nullptr;  // null: the index alone
  std::string describe() const {
    std::string text =
        std::string("guarded accelerator: ") + call + "'s argument " + std::to_string(index);
    if (name) text += std::string(" (") + name + ")";
    return text;
  }
};

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "guarded accelerator: %s\n", what.c_str());
  std::abort();
}

// Device memory: page-granular first-fit blocks of one reserved range. [base, highWater) is
// PROT_NONE while no guard is open and read-write while any is; nothing above highWater was ever
// handed out, and it stays PROT_NONE.
class Arena {
 public:
  Arena() : page_(static_cast<size_t>(sysconf(_SC_PAGESIZE))) {
    // One huge page more than the arena, so that the arena can start on a huge page boundary.
    const size_t reserved = kArenaBytes + kHugePage;
    void* p =
        mmap(nullptr, reserved, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
      throw Error(std::string("guarded accelerator: cannot reserve ") + humanBytes(reserved) +
                  " of address space for device memory: " + std::strerror(errno) +
                  " (is `ulimit -v` set?)");
    const uintptr_t start = reinterpret_cast<uintptr_t>(p);
    base_ = reinterpret_cast<char*>((start + kHugePage - 1) / kHugePage * kHugePage);
    if (base_ != p) munmap(p, static_cast<size_t>(base_ - static_cast<char*>(p)));
    munmap(base_ + kArenaBytes,
           start + reserved - reinterpret_cast<uintptr_t>(base_ + kArenaBytes));
    // Every open and close changes the protection of each page table entry below the high water:
    // with 2 MiB pages there are 512 times fewer (measured: 16 MiB in use, about 300 -> 20 us a
    // call). Where transparent huge pages are off this changes nothing.
    madvise(base_, kArenaBytes, MADV_HUGEPAGE);
    free_[0] = kArenaBytes;
    gArenaBase.store(reinterpret_cast<uintptr_t>(base_));
    installSegvHandler();
  }

  void* allocate(size_t bytes) {
    if (bytes > kArenaBytes)
      throw Error("guarded accelerator: cannot allocate " + humanBytes(bytes) +
                  " of device memory: the arena holds " + humanBytes(kArenaBytes));
    // A zero-byte allocation still takes a page, so that its pointer is unique.
    const size_t span = (std::max<size_t>(bytes, 1) + page_ - 1) / page_ * page_;
    size_t offset = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto block =
          std::find_if(free_.begin(), free_.end(), [&](const auto& b) { return b.second >= span; });
      if (block == free_.end())
        throw Error("guarded accelerator: cannot allocate " + humanBytes(bytes) +
                    " of device memory: " + humanBytes(kArenaBytes - used_) +
                    " free, in no block large enough");
      offset = block->first;
      const size_t end = offset + span;
      // Calls in flight see all of [base, highWater) read-write; the grown part must join them.
      if (end > highWater_ && opens_ > 0 &&
          mprotect(base_ + highWater_, end - highWater_, PROT_READ | PROT_WRITE) != 0)
        throw Error(std::string("guarded accelerator: mprotect of new device memory: ") +
                    std::strerror(errno));
      const size_t rest = block->second - span;
      free_.erase(block);
      if (rest > 0) free_[end] = rest;
      live_[offset] = {bytes, span};
      used_ += span;
      highWater_ = std::max(highWater_, end);
      gHighWater.store(highWater_);
      installSegvHandler();
    }
    // cudaMalloc promises no contents; NaN bytes make code that counts on zeros fail visibly.
    Guard guard(*this);
    std::memset(base_ + offset, 0xFF, span);
    return base_ + offset;
  }

  void release(void* p) noexcept {
    if (!p) return;
    std::lock_guard<std::mutex> lock(mutex_);
    const uintptr_t at = reinterpret_cast<uintptr_t>(p), base = reinterpret_cast<uintptr_t>(base_);
    auto live = at - base < kArenaBytes ? live_.find(at - base) : live_.end();
    if (live == live_.end())
      die("release(" + hexAddress(p) +
          "): not a live device allocation (released twice, or not from allocate())");
    const size_t offset = live->first, span = live->second.span;
    // Whole huge pages of the span go back to the system (whoever gets them next finds them
    // refilled with NaN bytes); partial ones stay, as dropping part of one would split it.
    const size_t first = (offset + kHugePage - 1) / kHugePage * kHugePage,
                 last = (offset + span) / kHugePage * kHugePage;
    if (first < last) madvise(base_ + first, last - first, MADV_DONTNEED);
    live_.erase(live);
    used_ -= span;
    addFree(offset, span);
  }

  DeviceMemoryInfo info() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return {kArenaBytes - used_, kArenaBytes};
  }

  // The arena readable for a call's duration. The first opener changes the protection before any
  // opener returns: later ones wait on the mutex until it has.
  void open() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (opens_ == 0) protect(PROT_READ | PROT_WRITE);
    ++opens_;
  }
  void close() noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    if (--opens_ > 0) return;
    protect(PROT_NONE);
    installSegvHandler();
  }

  class Guard {
   public:
    explicit Guard(Arena& arena) : arena_(arena) { arena_.open(); }
    ~Guard() { arena_.close(); }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

   private:
    Arena& arena_;
  };

  // Throws unless [p, p + bytes) lies in one live allocation (p may be its end when bytes is 0).
  void requireDevice(const void* p, size_t bytes, const Arg& arg) const {
    const uintptr_t at = reinterpret_cast<uintptr_t>(p), base = reinterpret_cast<uintptr_t>(base_);
    if (!p) throw Error(arg.describe() + " is null, and must be device memory");
    if (at - base >= kArenaBytes)
      throw Error(arg.describe() + " is not device memory (host address " + hexAddress(p) + ")");
    const size_t offset = at - base;
    std::lock_guard<std::mutex> lock(mutex_);
    auto next = live_.upper_bound(offset);
    const bool inside =
        next != live_.begin() && offset - std::prev(next)->first <= std::prev(next)->second.bytes;
    if (!inside)
      throw Error(arg.describe() + " (" + hexAddress(p) +
                  ") is in no live device allocation: released, or past the end of one");
    const auto& [start, block] = *std::prev(next);
    if (bytes > block.bytes - (offset - start))
      throw Error(arg.describe() + ": " + std::to_string(bytes) + " bytes from " + hexAddress(p) +
                  " run past the end of its device allocation (" + std::to_string(block.bytes) +
                  " bytes from " + hexAddress(base_ + start) + ")");
  }

  // Throws when [p, p + bytes) overlaps device memory: `kind` says it is host memory.
  void requireHost(const void* p, size_t bytes, CopyKind kind, const Arg& arg) const {
    const uintptr_t at = reinterpret_cast<uintptr_t>(p), base = reinterpret_cast<uintptr_t>(base_);
    if (at < base + kArenaBytes && at + std::max<size_t>(bytes, 1) > base)
      throw Error(arg.describe() + " is device memory (" + hexAddress(p) + "), but a " +
                  copyKindName(kind) + " copy takes host memory there");
  }

 private:
  struct Block {
    size_t bytes, span;  // as asked; as reserved (whole pages)
  };

  void protect(int prot) {
    if (highWater_ == 0 || mprotect(base_, highWater_, prot) == 0) return;
    const std::string why = std::string("mprotect of device memory (") + humanBytes(highWater_) +
                            "): " + std::strerror(errno);
    if (prot == PROT_NONE) die(why);  // from close(), which cannot throw
    throw Error("guarded accelerator: " + why);
  }

  // Puts [offset, offset + span) back, merged with free neighbours.
  void addFree(size_t offset, size_t span) {
    auto next = free_.lower_bound(offset);
    if (next != free_.end() && next->first == offset + span) {
      span += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {
      auto before = std::prev(next);
      if (before->first + before->second == offset) {
        before->second += span;
        return;
      }
    }
    free_[offset] = span;
  }

  const size_t page_;
  char* base_ = nullptr;
  mutable std::mutex mutex_;
  std::map<size_t, size_t> free_;  // offset -> bytes, no two adjacent
  std::map<size_t, Block> live_;   // offset -> allocation
  size_t used_ = 0;                // live spans
  size_t highWater_ = 0;           // end of the highest span ever handed out
  int opens_ = 0;                  // guards open, over all threads
};

// Never destroyed: device buffers in other statics may be released after this file's statics die.
Arena& arena() {
  static Arena* instance = new Arena;
  return *instance;
}

using Guard = Arena::Guard;

// Device memory, where the contract allows null for an empty range.
void requireDeviceOrEmpty(const void* p, size_t bytes, const Arg& arg) {
  if (p || bytes > 0) arena().requireDevice(p, bytes, arg);
}

// ---- The transformer kernels ----------------------------------------------------------------

// Every slot of TransformerKernels, in declaration order (the designated initializer below
// refuses any other order or a repeat; the static_assert, a missing one).
#define DS_GUARDED_KERNELS(X)                                                                 \
  X(layerNormForward)                                                                         \
  X(layerNormBackward)                                                                        \
  X(rmsNormForward)                                                                           \
  X(rmsNormBackward)                                                                          \
  X(unitForward) X(unitBackward) X(gatedForward) X(gatedBackward) X(scaleNormForward)         \
      X(scaleNormBackward) X(causalSoftmaxForward) X(softmaxBackward) X(attentionTileSoftmax) \
          X(attentionRowsFinish) X(attentionTileProbs) X(attentionTileScoreGrad) X(rowDots)   \
              X(rotary) X(crossEntropy) X(embeddingForward) X(embeddingBackward) X(addBias)   \
                  X(biasGradient) X(add) X(dropout) X(normalFromDraws) X(normalFromPhilox)

#define DS_COUNT_SLOT(name) +1
constexpr size_t kSlots = 0 DS_GUARDED_KERNELS(DS_COUNT_SLOT);
#undef DS_COUNT_SLOT
static_assert(sizeof(TransformerKernels) == kSlots * sizeof(void (*)()),
              "a TransformerKernels slot is missing from DS_GUARDED_KERNELS: it would stay null");

// Every pointer argument of a kernel is device memory (transformer_kernels.h's contracts); null
// ones are the optional arguments (embeddingForward's pos, embeddingBackward's dpos).
template <class T>
void checkArgument(const char* kernel, size_t index, T value) {
  if constexpr (std::is_pointer_v<T>)
    if (value) arena().requireDevice(value, 0, {kernel, index});
}
template <size_t... I, class... A>
void checkArguments(const char* kernel, std::index_sequence<I...>, A... a) {
  (checkArgument(kernel, I + 1, a), ...);
}

// One slot: its pointers checked, then the CPU backend's kernel of that slot inside a guard.
template <class Slot, class F>
struct Guarded;
template <class Slot, class R, class... A>
struct Guarded<Slot, R (*)(A...)> {
  static R call(A... a) {
    checkArguments(Slot::kName, std::index_sequence_for<A...>{}, a...);
    Guard guard(arena());
    return (cpuAccelerator().transformerKernels().*Slot::kMember)(a...);
  }
};

#define DS_SLOT(name)                                          \
  struct name##Slot {                                          \
    static constexpr const char* kName = #name;                \
    static constexpr auto kMember = &TransformerKernels::name; \
  };
DS_GUARDED_KERNELS(DS_SLOT)
#undef DS_SLOT

#define DS_ENTRY(name) .name = &Guarded<name##Slot, decltype(TransformerKernels::name)>::call,
constexpr TransformerKernels kGuardedKernels = {DS_GUARDED_KERNELS(DS_ENTRY)};
#undef DS_ENTRY

// ---- The backend ----------------------------------------------------------------------------

size_t gemmOperandBytes(size_t rows, size_t cols, size_t ld, DType type) {
  return rows == 0 || cols == 0 ? 0 : ((rows - 1) * ld + cols) * dtypeBytes(type);
}

class GuardedAccelerator final : public Accelerator {
 public:
  DeviceKind kind() const override { return DeviceKind::Cpu; }
  std::string deviceName() const override { return "guarded " + cpu().deviceName(); }
  int deviceCount() const override { return 1; }
  void setDevice(int index) override { cpu().setDevice(index); }
  int currentDevice() const override { return 0; }
  const char* communicationBackend() const override { return "gloo"; }
  bool supportsBf16() const override { return true; }
  bool supportsFp16() const override { return true; }
  bool hostAccessible() const override { return false; }  // the point of this backend

  void* allocate(size_t bytes) override { return arena_.allocate(bytes); }
  void release(void* device) noexcept override { arena_.release(device); }
  void* allocatePinned(size_t bytes) override {
    const size_t rounded =
        (std::max<size_t>(bytes, 1) + kPinnedAlignment - 1) / kPinnedAlignment * kPinnedAlignment;
    void* p = std::aligned_alloc(kPinnedAlignment, rounded);
    if (!p)
      throw Error("guarded accelerator: cannot allocate " + humanBytes(bytes) +
                  " of pinned memory");
    return p;
  }
  void releasePinned(void* host) noexcept override { std::free(host); }
  DeviceMemoryInfo memoryInfo() const override { return arena_.info(); }
  void fillZero(void* device, size_t bytes, Stream stream) override {
    requireDeviceOrEmpty(device, bytes, {"fillZero", 1, "device"});
    Guard guard(arena_);
    cpu().fillZero(device, bytes, stream);
  }

  Stream createStream() override { return cpu().createStream(); }
  void destroyStream(Stream stream) noexcept override { cpu().destroyStream(stream); }
  void synchronize(Stream stream) override { cpu().synchronize(stream); }
  void synchronizeDevice() override { cpu().synchronizeDevice(); }
  void setCurrentStream(Stream stream) override { cpu().setCurrentStream(stream); }
  Stream currentStream() const override { return cpu().currentStream(); }
  Event createEvent() override { return cpu().createEvent(); }
  void destroyEvent(Event event) noexcept override { cpu().destroyEvent(event); }
  void recordEvent(Event event, Stream stream) override { cpu().recordEvent(event, stream); }
  void waitEvent(Stream stream, Event event) override { cpu().waitEvent(stream, event); }
  void synchronizeEvent(Event event) override { cpu().synchronizeEvent(event); }
  float elapsedMs(Event start, Event end) override { return cpu().elapsedMs(start, end); }

  void copy(void* dst, const void* src, size_t bytes, CopyKind kind, Stream stream) override {
    checkCopy("copy", dst, 1, bytes, src, 2, bytes, kind);
    Guard guard(arena_);
    cpu().copy(dst, src, bytes, kind, stream);
  }
  void copyRows(void* dst, size_t dstPitch, const void* src, size_t srcPitch, size_t rowBytes,
                size_t rows, CopyKind kind, Stream stream) override {
    const auto span = [&](size_t pitch) {
      return rows == 0 || rowBytes == 0 ? 0 : (rows - 1) * pitch + rowBytes;
    };
    checkCopy("copyRows", dst, 1, span(dstPitch), src, 3, span(srcPitch), kind);
    Guard guard(arena_);
    cpu().copyRows(dst, dstPitch, src, srcPitch, rowBytes, rows, kind, stream);
  }

  void gemm(size_t m, size_t n, size_t k, float alpha, const GemmInput& a, const GemmInput& b,
            float beta, const GemmOutput& c, Stream stream) override {
    checkGemmTypes(a, b, c);  // first: a type error must not read as a range error
    const bool ta = a.op == Transpose::Yes, tb = b.op == Transpose::Yes;
    requireDeviceOrEmpty(a.data, gemmOperandBytes(ta ? k : m, ta ? m : k, a.ld, a.type),
                         {"gemm", 5, "a.data"});
    requireDeviceOrEmpty(b.data, gemmOperandBytes(tb ? n : k, tb ? k : n, b.ld, b.type),
                         {"gemm", 6, "b.data"});
    requireDeviceOrEmpty(c.data, gemmOperandBytes(m, n, c.ld, c.type), {"gemm", 8, "c.data"});
    Guard guard(arena_);
    cpu().gemm(m, n, k, alpha, a, b, beta, c, stream);
  }

  const TransformerKernels& transformerKernels() override { return kGuardedKernels; }

  // dropout (and its sampleBases) is host memory by the interface's contract: not checked.
  void attentionForward(const AttentionShape& s, const float* qkv, float* ctx, float* stats,
                        const AttentionDropout* dropout) override {
    const size_t rows = s.samples * s.seq;
    requireDeviceOrEmpty(qkv, rows * s.qkvStride() * 4, {"attentionForward", 2, "qkv"});
    requireDeviceOrEmpty(ctx, rows * s.ctxStride() * 4, {"attentionForward", 3, "ctx"});
    requireDeviceOrEmpty(stats, s.statsSize() * 4, {"attentionForward", 4, "stats"});
    Guard guard(arena_);
    cpu().attentionForward(s, qkv, ctx, stats, dropout);
  }
  void attentionBackward(const AttentionShape& s, const float* qkv, const float* ctx,
                         const float* stats, const float* dCtx, float* dqkv,
                         const AttentionDropout* dropout) override {
    const size_t rows = s.samples * s.seq, qkvBytes = rows * s.qkvStride() * 4,
                 ctxBytes = rows * s.ctxStride() * 4;
    requireDeviceOrEmpty(qkv, qkvBytes, {"attentionBackward", 2, "qkv"});
    requireDeviceOrEmpty(ctx, ctxBytes, {"attentionBackward", 3, "ctx"});
    requireDeviceOrEmpty(stats, s.statsSize() * 4, {"attentionBackward", 4, "stats"});
    requireDeviceOrEmpty(dCtx, ctxBytes, {"attentionBackward", 5, "dCtx"});
    requireDeviceOrEmpty(dqkv, qkvBytes, {"attentionBackward", 6, "dqkv"});
    Guard guard(arena_);
    cpu().attentionBackward(s, qkv, ctx, stats, dCtx, dqkv, dropout);
  }

  void adamStep(float* params, const float* grads, float* m, float* v, size_t count,
                const AdamStepConstants& constants, const HalfCopy& copy, Stream stream) override {
    const size_t bytes = count * sizeof(float);
    requireDeviceOrEmpty(params, bytes, {"adamStep", 1, "params"});
    requireDeviceOrEmpty(grads, bytes, {"adamStep", 2, "grads"});
    requireDeviceOrEmpty(m, bytes, {"adamStep", 3, "m"});
    requireDeviceOrEmpty(v, bytes, {"adamStep", 4, "v"});
    if (copy.out)  // null: no half copy
      arena_.requireDevice(copy.out, count * sizeof(uint16_t), {"adamStep", 7, "copy.out"});
    Guard guard(arena_);
    cpu().adamStep(params, grads, m, v, count, constants, copy, stream);
  }

  void unscaleGradients(const void* in, DType type, float* out, size_t count, float unscale,
                        uint32_t* overflow, Stream stream) override {
    requireDeviceOrEmpty(in, count * dtypeBytes(type), {"unscaleGradients", 1, "in"});
    requireDeviceOrEmpty(out, count * sizeof(float), {"unscaleGradients", 3, "out"});
    arena_.requireDevice(overflow, sizeof(uint32_t), {"unscaleGradients", 6, "overflow"});
    Guard guard(arena_);
    cpu().unscaleGradients(in, type, out, count, unscale, overflow, stream);
  }

 private:
  static Accelerator& cpu() { return cpuAccelerator(); }

  // Each side of a copy where `kind` puts it: device memory in a live allocation, host memory
  // outside the arena.
  void checkCopy(const char* call, const void* dst, size_t dstIndex, size_t dstBytes,
                 const void* src, size_t srcIndex, size_t srcBytes, CopyKind kind) const {
    const Arg dstArg{call, dstIndex, "dst"}, srcArg{call, srcIndex, "src"};
    if (kind == CopyKind::DeviceToHost)
      arena_.requireHost(dst, dstBytes, kind, dstArg);
    else
      requireDeviceOrEmpty(dst, dstBytes, dstArg);
    if (kind == CopyKind::HostToDevice)
      arena_.requireHost(src, srcBytes, kind, srcArg);
    else
      requireDeviceOrEmpty(src, srcBytes, srcArg);
  }

  Arena& arena_ = arena();
};

}  // namespace

Accelerator& guardedCpuAccelerator() {
  static GuardedAccelerator instance;
  return instance;
}

}  // namespace ds::kernels
