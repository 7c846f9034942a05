// Lists the device code that nvcc embedded in a host object file, so a test can show
// that CUDA code was compiled for the architectures we ship (the job `cuobjdump
// --list-elf` would do; the toolkit here has no cuobjdump).
//
// Formats read (as observed from nvcc 13; bounds-checked, so bad input is an error,
// never a crash):
//  - the host object is ELF64; nvcc puts the fat binary in its ".nv_fatbin" section;
//  - a fat binary is containers of {u32 magic 0xBA55ED50, u16 version, u16 header size,
//    u64 size of the entries}, each entry {u16 kind (1 PTX, 2 ELF cubin), u16 version,
//    u32 header size, u64 payload size, ..., u32 SM architecture at byte 28, ...} followed
//    by its payload;
//  - an uncompressed cubin is ELF64 with e_machine 190 (EM_CUDA), its SM architecture in
//    bits 8-15 of e_flags, and one ".text.<mangled name>" section per kernel.
#ifndef TESSERA_CUDA_FATBIN_READER_H_
#define TESSERA_CUDA_FATBIN_READER_H_

#include <string>
#include <vector>

#include "base/status.h"

namespace tessera {
namespace cuda {

struct DeviceImage {
  enum class Kind { kPtx, kCubin, kOther } kind = Kind::kOther;
  int arch = 0;                      // from the fat binary entry: 80 for sm_80 / compute_80
  bool readable = false;             // a cubin stored uncompressed (kernels and elf_arch known)
  int elf_arch = 0;                  // from the cubin's own ELF header
  std::vector<std::string> kernels;  // mangled kernel names
};

// The device images embedded in the ELF host object held in `object` (file contents).
Status ReadDeviceImages(const std::string& object, std::vector<DeviceImage>* out);

}  // namespace cuda
}  // namespace tessera

#endif  // TESSERA_CUDA_FATBIN_READER_H_
