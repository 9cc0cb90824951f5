#include "runtime/offload/io_fault_injection.h"

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/errno_text.h"
#include "common/error.h"
#include "runtime/offload/transfer_parts.h"

namespace ds::runtime {
namespace {

enum class FaultKind { kRead, kWrite, kAny };

struct FaultPlan {
  FaultKind kind = FaultKind::kAny;
  long nth = 0;
  int err = EIO;
  bool corrupt = false;  // no error: one byte of the transfer's data is changed instead
};

FaultPlan parsePlan(const std::string& text) {
  const auto bad = [&] {
    return Error(std::string(kIoFaultVariable) + "=" + text +
                 ": expected KIND:N[:ERRNO] with KIND read, write or any, N >= 1 and ERRNO EIO, "
                 "ENOSPC, a number or corrupt");
  };
  const size_t colon = text.find(':');
  if (colon == std::string::npos) throw bad();
  FaultPlan plan;
  const std::string kind = text.substr(0, colon);
  if (kind == "read")
    plan.kind = FaultKind::kRead;
  else if (kind == "write")
    plan.kind = FaultKind::kWrite;
  else if (kind != "any")
    throw bad();
  const std::string rest = text.substr(colon + 1);
  const size_t second = rest.find(':');
  try {
    plan.nth = std::stol(rest.substr(0, second));
  } catch (const std::exception&) {
    throw bad();
  }
  if (plan.nth < 1) throw bad();
  if (second != std::string::npos) {
    const std::string err = rest.substr(second + 1);
    if (err == "EIO")
      plan.err = EIO;
    else if (err == "ENOSPC")
      plan.err = ENOSPC;
    else if (err == "corrupt")
      plan.corrupt = true;
    else
      try {
        plan.err = std::stoi(err);
      } catch (const std::exception&) {
        throw bad();
      }
  }
  return plan;
}

// Requests are counted per process, across every engine, so "the 3rd write" means the same
// thing whichever swapper makes it.
std::atomic<long> readsSeen{0}, writesSeen{0}, anySeen{0};

class FaultyEngine final : public AioEngine {
 public:
  FaultyEngine(std::unique_ptr<AioEngine> inner, FaultPlan plan)
      : inner_(std::move(inner)), plan_(plan) {}
  const char* name() const override { return inner_->name(); }
  void read(const std::string& path, void* buffer, size_t bytes, uint64_t offset) override {
    const bool corrupt = fault(false, path, bytes, offset);
    inner_->read(path, buffer, bytes, offset);
    if (corrupt && bytes > 0) static_cast<unsigned char*>(buffer)[bytes / 2] ^= 0x40;
  }
  void write(const std::string& path, const void* buffer, size_t bytes, uint64_t offset) override {
    if (!fault(true, path, bytes, offset) || bytes == 0) {
      inner_->write(path, buffer, bytes, offset);
      return;
    }
    AlignedBuffer changed(bytes, /*lock=*/false);
    std::memcpy(changed.data(), buffer, bytes);
    static_cast<unsigned char*>(changed.data())[bytes / 2] ^= 0x40;
    inner_->write(path, changed.data(), bytes, offset);
  }

 private:
  // Throws the planned error for the planned request; true where that request's data is to be
  // changed instead.
  bool fault(bool write, const std::string& path, size_t bytes, uint64_t offset) {
    std::atomic<long>& counter = plan_.kind == FaultKind::kAny ? anySeen
                                 : write                       ? writesSeen
                                                               : readsSeen;
    if ((plan_.kind == FaultKind::kRead && write) || (plan_.kind == FaultKind::kWrite && !write))
      return false;
    if (counter.fetch_add(1) + 1 != plan_.nth) return false;
    if (plan_.corrupt) return true;
    throw Error(describeTransfer(path, offset, bytes) + ": " + (write ? "write" : "read") +
                " failed: " + errnoText(plan_.err) + " [injected by " + kIoFaultVariable + "]");
  }

  std::unique_ptr<AioEngine> inner_;
  FaultPlan plan_;
};

}  // namespace

std::unique_ptr<AioEngine> withInjectedIoFault(std::unique_ptr<AioEngine> engine) {
  const char* value = std::getenv(kIoFaultVariable);
  if (!value || !*value) return engine;
  return std::make_unique<FaultyEngine>(std::move(engine), parsePlan(value));
}

}  // namespace ds::runtime
