# Every third-party dependency, found once. All come from Debian's apt (scripts/setup installs them).
find_package(Threads REQUIRED)
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)
find_package(Gloo CONFIG REQUIRED)
find_package(Boost 1.74 REQUIRED)
# The CPU's matrix products: AUTO, oneDNN's sgemm where Debian has it (libdnnl-dev: the faster
# here, docs/benchmarks.md), else OpenBLAS (libopenblas-dev, required); NONE, none at all, for a
# build whose models compute on a GPU only (scripts/gpu-bundle: kernels/cpu/matmul_missing.cc).
set(DS_MATMUL_LIBRARY AUTO CACHE STRING "CPU matrix products: AUTO (oneDNN, else OpenBLAS) or NONE")
if(NOT DS_MATMUL_LIBRARY STREQUAL "NONE")
  set(BLA_VENDOR OpenBLAS)
  find_package(BLAS REQUIRED)
  find_package(dnnl CONFIG QUIET)
endif()
find_package(OpenMP QUIET)
find_package(CLI11 CONFIG REQUIRED)
find_package(yaml-cpp CONFIG REQUIRED)
find_package(nlohmann_json 3 CONFIG REQUIRED)
# Unicode normalization for tokenizer.json's NFC normalizer (Debian's libicu-dev). DS_ICU=OFF
# leaves it out (its data library is 31 MB: scripts/gpu-bundle), and that normalizer is refused.
option(DS_ICU "Unicode normalization through ICU (tokenizer.json's NFC normalizer)" ON)
if(DS_ICU)
  find_package(ICU REQUIRED COMPONENTS uc data)
endif()
find_package(Catch2 2 CONFIG REQUIRED)

# SentencePiece (Debian: libsentencepiece-dev) for NeoX's SPMTokenizer. Its pkg-config file also
# links the trainer library, which nothing here needs: only the processor library is taken.
find_path(SENTENCEPIECE_INCLUDE_DIR sentencepiece_processor.h)
find_library(SENTENCEPIECE_LIBRARY sentencepiece)
if(NOT SENTENCEPIECE_INCLUDE_DIR OR NOT SENTENCEPIECE_LIBRARY)
  message(FATAL_ERROR "SentencePiece not found (sentencepiece_processor.h, libsentencepiece.so); "
                      "install libsentencepiece-dev (scripts/setup does)")
endif()
add_library(ds_sentencepiece INTERFACE IMPORTED)
target_include_directories(ds_sentencepiece INTERFACE ${SENTENCEPIECE_INCLUDE_DIR})
target_link_libraries(ds_sentencepiece INTERFACE ${SENTENCEPIECE_LIBRARY})

# libaio ships no CMake or pkg-config file. Without it (or with DS_LIBAIO=OFF) offload I/O runs
# on the pread/pwrite engine (runtime/offload/libaio_missing.cc).
set(DS_LIBAIO_FOUND OFF)
if(NOT DS_LIBAIO STREQUAL "OFF")
  find_path(LIBAIO_INCLUDE_DIR libaio.h)
  find_library(LIBAIO_LIBRARY aio)
  if(LIBAIO_INCLUDE_DIR AND LIBAIO_LIBRARY)
    add_library(ds_libaio INTERFACE IMPORTED)
    target_include_directories(ds_libaio INTERFACE ${LIBAIO_INCLUDE_DIR})
    target_link_libraries(ds_libaio INTERFACE ${LIBAIO_LIBRARY})
    set(DS_LIBAIO_FOUND ON)
  elseif(DS_LIBAIO STREQUAL "ON")
    message(FATAL_ERROR "DS_LIBAIO=ON but libaio.h or libaio.so was not found; install libaio-dev or use -DDS_LIBAIO=AUTO")
  endif()
endif()

# CUDA and NCCL: only when asked for (ON) or when nvcc is present (AUTO). The CPU build never needs them.
set(DS_CUDA_ENABLED OFF)
set(DS_NCCL_FOUND OFF)
if(NOT DS_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_STANDARD 17)
    if(NOT CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(DS_CUDA_ENABLED ON)
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
    if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
      set(DS_NCCL_FOUND ON)
    endif()
  elseif(DS_CUDA STREQUAL "ON")
    message(FATAL_ERROR "DS_CUDA=ON but no CUDA compiler was found; install the CUDA toolkit or use -DDS_CUDA=AUTO")
  endif()
endif()
