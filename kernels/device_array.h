// A growable array in an accelerator's device memory, resized as std::vector is (contents kept,
// new elements zero), so that the model's activation buffers live wherever its accelerator
// computes: host memory on the CPU backend, GPU memory on CUDA. It has no element access: host
// code reads device data only through copyToHost (which waits for the copy), so every place that
// would read a GPU's memory from the host fails to compile rather than at run time.
#pragma once

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

#include "kernels/accelerator.h"

namespace ds::kernels {

template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(DeviceArray&& other) noexcept { swap(other); }
  DeviceArray& operator=(DeviceArray&& other) noexcept {
    DeviceArray(std::move(other)).swap(*this);
    return *this;
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { release(); }

  // n elements on `acc` (the accelerator of the first allocation must stay the same): those
  // already held are kept, new ones are zero. Never shrinks the allocation; returns data().
  T* resize(Accelerator& acc, size_t n) {
    if (n > capacity_) reallocate(acc, n, size_);
    if (n > size_) acc.fillZero(data_ + size_, (n - size_) * sizeof(T), stream(acc));
    size_ = n;
    return data_;
  }
  // n elements whose values the caller overwrites next (none kept, none zeroed; C++23's
  // resize_and_overwrite): a copy's destination pays no fill.
  T* resizeForOverwrite(Accelerator& acc, size_t n) {
    if (n > capacity_) reallocate(acc, n, 0);
    size_ = n;
    return data_;
  }
  void clear() { size_ = 0; }  // keeps the allocation
  // Gives the memory back (std::vector's swap with an empty one).
  void release() noexcept {
    if (acc_ && data_) acc_->release(data_);
    data_ = nullptr;
    size_ = capacity_ = 0;
  }
  void swap(DeviceArray& other) noexcept {
    std::swap(acc_, other.acc_);
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    std::swap(capacity_, other.capacity_);
  }

  T* data() const { return data_; }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  bool empty() const { return size_ == 0; }

 private:
  static Stream stream(Accelerator& acc) { return acc.currentStream(); }
  // A fresh allocation of `capacity` elements holding the first `kept` of the old one.
  void reallocate(Accelerator& acc, size_t capacity, size_t kept) {
    T* fresh = static_cast<T*>(acc.allocate(capacity * sizeof(T)));
    if (kept) acc.copy(fresh, data_, kept * sizeof(T), CopyKind::DeviceToDevice, stream(acc));
    release();
    acc_ = &acc;
    data_ = fresh;
    size_ = kept;
    capacity_ = capacity;
  }

  Accelerator* acc_ = nullptr;
  T* data_ = nullptr;
  size_t size_ = 0, capacity_ = 0;
};

// Resizes `a` to n elements (kept ones kept, new ones zero) and returns its data.
template <class T>
T* sized(Accelerator& acc, DeviceArray<T>& a, size_t n) {
  return a.resize(acc, n);
}

// `a` becomes a copy of n elements at `src` in device memory.
template <class T>
void assignDevice(Accelerator& acc, DeviceArray<T>& a, const T* src, size_t n) {
  acc.copy(a.resizeForOverwrite(acc, n), src, n * sizeof(T), CopyKind::DeviceToDevice,
           acc.currentStream());
}

// `a` becomes a copy of the host values.
template <class T>
void assignHost(Accelerator& acc, DeviceArray<T>& a, const std::vector<T>& values) {
  acc.copy(a.resizeForOverwrite(acc, values.size()), values.data(), values.size() * sizeof(T),
           CopyKind::HostToDevice, acc.currentStream());
}

// n elements of device memory at `src`, on the host once the copy is done.
template <class T>
std::vector<T> copyToHost(Accelerator& acc, const T* src, size_t n) {
  std::vector<T> out(n);
  acc.copy(out.data(), src, n * sizeof(T), CopyKind::DeviceToHost, acc.currentStream());
  acc.synchronize(acc.currentStream());
  return out;
}

}  // namespace ds::kernels
